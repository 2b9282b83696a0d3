"""The benchmarks COPY rows of their own making into `cases` (bench/common.py, `case_row`):
they must be the rows the service writes, so that a report finished over them verifies, and a
column the schema gains shows here rather than first in a benchmark run (the `measures` column
stopped three benchmarks at their COPY until this test)."""

from __future__ import annotations

import uuid

import asyncpg
import httpx

from app.digest.canonical import canonical_bytes
from app.platform.config import to_plain_url
from bench.common import case_row, copy_cases
from tests.conftest import Project
from tests.factories import define_suite, start_evaluation

SUITE = {
    "validity_hours": 168,
    "decision_rule": {"rule": "threshold", "alpha": 0.05, "margin": 0, "correction": "none"},
    "checks": [
        {
            "check_id": "accuracy",
            "scorer": {"name": "exact-match", "version": "1"},
            "dataset": {"name": "qa", "version": "1"},
            "aggregation": {"method": "pass_rate", "threshold": 0.5},
        }
    ],
}


async def test_a_report_over_the_benchmarks_rows_verifies(
    project: Project, client: httpx.AsyncClient, database_url: str
) -> None:
    headers = await project.admin()
    await define_suite(client, headers, suite="bench", body=SUITE)
    evaluation_id = (await start_evaluation(client, headers, suite="bench"))["evaluation_id"]
    connection = await asyncpg.connect(to_plain_url(database_url))
    try:
        digest = await connection.fetchval(
            "SELECT digest FROM scorer_versions WHERE project_id = $1 AND name = 'exact-match'",
            project.id,
        )
        made = [
            case_row(
                uuid.UUID(evaluation_id),
                "accuracy",
                f"e{i:02d}",
                i,
                0,
                "pass" if i % 3 else "fail",
                canonical_bytes({"answer": "x" * (40 * i)}),
                digest,
            )
            for i in range(12)
        ]
        await copy_cases(connection, [row for row, _ in made], [kept for _, kept in made])
    finally:
        await connection.close()
    finished = await client.post(f"/api/v1/evaluations/{evaluation_id}/finish", headers=headers)
    assert finished.status_code == 201, finished.text
    assert finished.json()["body"]["checks"][0]["cases"]["count"] == 12
    verified = await client.post(
        "/evaluations/api/reports/verify",
        json={"report_id": finished.json()["report_id"]},
        headers=headers,
    )
    assert verified.json()["verified"] is True, verified.json()["findings"]
