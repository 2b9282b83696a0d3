"""Building definitions and evaluations through the API."""

from __future__ import annotations

import asyncio
import sys
import uuid
from pathlib import Path
from typing import Any

import asyncpg
import httpx

from app.platform.config import to_plain_url

EXAMPLE_IDS = [f"e{i:02d}" for i in range(12)]


def dataset_body(count: int = 12, german_every: int = 4) -> dict[str, Any]:
    """A dataset with `count` examples, every `german_every`-th tagged lang:de."""
    return {
        "examples": [
            {
                "id": f"e{i:02d}",
                "body": {"q": f"question {i}"},
                "tags": ["lang:de" if i % german_every == 0 else "lang:en"],
            }
            for i in range(count)
        ]
    }


def suite_body(rule: str = "threshold", correction: str = "none") -> dict[str, Any]:
    """Three checks: pass_rate with a required slice, all_pass, and an optional mean."""
    return {
        "validity_hours": 168,
        "decision_rule": {"rule": rule, "alpha": 0.05, "margin": 0, "correction": correction},
        "checks": [
            {
                "check_id": "accuracy",
                "required": True,
                "scorer": {"name": "exact-match", "version": "1"},
                "dataset": {"name": "qa", "version": "1"},
                "aggregation": {"method": "pass_rate", "threshold": 0.7},
                "slices": [
                    {"name": "german", "tag": "lang:de", "required": True, "threshold": 0.6}
                ],
            },
            {
                "check_id": "no_harm",
                "scorer": {"name": "harm-judge", "version": "2"},
                "dataset": {"name": "qa", "version": "1"},
                "aggregation": {"method": "all_pass"},
            },
            {
                "check_id": "helpfulness",
                "required": False,
                "scorer": {"name": "helpful-judge", "version": "1"},
                "dataset": {"name": "qa", "version": "1"},
                "repeats": 2,
                "aggregation": {"method": "mean", "threshold": 0.6},
                "min_coverage": 0.9,
                "min_samples": 5,
            },
        ],
    }


async def define_suite(
    client: httpx.AsyncClient,
    headers: dict[str, str],
    suite: str = "rag",
    version: str = "1",
    body: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Register the scorers, the dataset and a suite version."""
    for name, version_, score_range in (
        ("exact-match", "1", None),
        ("harm-judge", "2", None),
        ("helpful-judge", "1", [0, 1]),
    ):
        response = await client.put(
            f"/api/v1/scorers/{name}/versions/{version_}",
            json={"definition": {"kind": name}, "score_range": score_range},
            headers=headers,
        )
        assert response.status_code in (200, 201), response.text
    response = await client.put(
        "/api/v1/datasets/qa/versions/1", json=dataset_body(), headers=headers
    )
    assert response.status_code in (200, 201), response.text
    response = await client.put(
        f"/api/v1/suites/{suite}/versions/{version}", json=body or suite_body(), headers=headers
    )
    assert response.status_code in (200, 201), response.text
    result: dict[str, Any] = response.json()
    return result


async def start_evaluation(
    client: httpx.AsyncClient, headers: dict[str, str], suite: str = "rag", **extra: Any
) -> dict[str, Any]:
    """Start a gate evaluation of the suite's active version."""
    body = {
        "subject": {"digest": "sha1:0123456789abcdef0123456789abcdef01234567", "repo": "acme/web"},
        "suite": {"name": suite},
        "mode": "gate",
        "execution_mode": "platform",
        **extra,
    }
    response = await client.post("/api/v1/evaluations", json=body, headers=headers)
    assert response.status_code == 201, response.text
    result: dict[str, Any] = response.json()
    return result


def case(
    check: str, example: str, repeat: int = 0, status: str = "pass", **extra: Any
) -> dict[str, Any]:
    """One case body."""
    return {"check_id": check, "example_id": example, "repeat": repeat, "status": status, **extra}


def problem(response: httpx.Response, status: int) -> dict[str, Any]:
    """Assert an RFC 9457 problem with this status; return it."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    body: dict[str, Any] = response.json()
    for key in ("type", "title", "status", "detail", "instance"):
        assert key in body, body
    assert body["status"] == status
    assert "Traceback" not in response.text
    return body


async def behind_the_triggers(database_url: str, report_id: uuid.UUID, *statements: str) -> None:
    """Run statements as the database's superuser with triggers off, as someone with database
    access could (`session_replication_role = replica`); each takes the report id as $1."""
    connection = await asyncpg.connect(to_plain_url(database_url))
    try:
        async with connection.transaction():
            await connection.execute("SET LOCAL session_replication_role = replica")
            for statement in statements:
                await connection.execute(statement, report_id)
    finally:
        await connection.close()


async def run_cases(client: httpx.AsyncClient, headers: dict[str, str], evaluation_id: str) -> None:
    """Twelve cases of each of the standard suite's two checks."""
    cases = [case("accuracy", f"e{i:02d}", output={"a": i}) for i in range(12)]
    cases += [case("no_harm", f"e{i:02d}", output={"v": "ok"}) for i in range(12)]
    response = await client.post(
        f"/api/v1/evaluations/{evaluation_id}/cases", json={"cases": cases}, headers=headers
    )
    assert response.status_code == 200, response.text


async def send_and_finish(
    client: httpx.AsyncClient,
    headers: dict[str, str],
    evaluation_id: str,
    cases: list[dict[str, Any]],
) -> dict[str, Any]:
    """Send `cases` to the evaluation in one batch and finish it: the report."""
    url = f"/api/v1/evaluations/{evaluation_id}"
    sent = await client.post(f"{url}/cases", json={"cases": cases}, headers=headers)
    assert sent.status_code == 200, sent.text
    done = await client.post(f"{url}/finish", headers=headers)
    assert done.status_code == 201, done.text
    report: dict[str, Any] = done.json()
    return report


async def finished(
    client: httpx.AsyncClient, headers: dict[str, str], **start: Any
) -> dict[str, Any]:
    """An evaluation of the standard suite, started, given its cases and finished: its report."""
    evaluation = await start_evaluation(client, headers, **start)
    await run_cases(client, headers, evaluation["evaluation_id"])
    response = await client.post(
        f"/api/v1/evaluations/{evaluation['evaluation_id']}/finish", headers=headers
    )
    assert response.status_code == 201, response.text
    return response.json()


async def first_report(
    project: Any, client: httpx.AsyncClient
) -> tuple[dict[str, str], dict[str, Any]]:
    """A new project admin's headers, and the report of the standard suite's first evaluation."""
    headers = await project.admin()
    await define_suite(client, headers)
    return headers, await finished(client, headers)


_REPO = Path(__file__).resolve().parent.parent


async def evalbook_cli(
    *args: str, env: dict[str, str], cwd: Path = _REPO, seconds: float = 120
) -> tuple[int, str]:
    """`evalbook ARGS` in a process of its own, in `cwd` (the repository), with `env`:
    (exit, output)."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "app.cli.main",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        cwd=cwd,
        env=env,
    )
    output, _ = await asyncio.wait_for(process.communicate(), seconds)
    assert process.returncode is not None
    return process.returncode, output.decode()


# Per subject: which of the 12 examples of `accuracy` fail, and helpfulness' scores.
BOARD_FIELD = {
    "sha1:" + "1" * 40: (set(), 0.9),
    "sha1:" + "2" * 40: ({0, 1}, 0.8),
    "sha1:" + "3" * 40: ({0, 1, 2, 3, 4, 5, 6}, 0.5),
    "sha1:" + "4" * 40: ({3, 7, 11}, 0.7),
}


async def issue_board_subject(
    client: httpx.AsyncClient, headers: dict[str, str], subject: str
) -> Any:
    """A current gate report of `subject` on the standard suite, its cases as BOARD_FIELD says."""
    fails, helpful = BOARD_FIELD[subject]
    start = {"subject": {"digest": subject}, "suite": {"name": "rag"}, "mode": "gate"}
    started = await client.post(
        "/api/v1/evaluations", json={**start, "execution_mode": "platform"}, headers=headers
    )
    evaluation = started.json()["evaluation_id"]
    cases = [
        case("accuracy", f"e{i:02d}", status="fail" if i in fails else "pass", output={"a": i})
        for i in range(12)
    ]
    cases += [case("no_harm", f"e{i:02d}", output={"v": "ok"}) for i in range(12)]
    cases += [
        case("helpfulness", f"e{i:02d}", r, status="pass", score=helpful - 0.01 * ((i + r) % 3))
        for i in range(12)
        for r in range(2)
    ]
    return await send_and_finish(client, headers, evaluation, cases)
