"""Messages a person reads: locations as sent, no library prefixes, lines called lines, the
command line naming its options."""

from __future__ import annotations

import httpx

from tests.conftest import Project, run_cli
from tests.factories import define_suite, problem, start_evaluation, suite_body


async def test_a_threshold_error_points_at_the_threshold(
    project: Project, client: httpx.AsyncClient
) -> None:
    headers = await project.admin()
    await define_suite(client, headers)
    body = suite_body()
    del body["checks"][0]["aggregation"]["threshold"]
    answer = problem(
        await client.put("/api/v1/suites/other/versions/1", json=body, headers=headers), 422
    )
    assert answer["errors"][0]["loc"] == ["body", "checks", 0, "aggregation", "threshold"]
    assert answer["detail"] == "body.checks.0.aggregation.threshold: Field required"


async def test_no_value_error_prefix(project: Project, client: httpx.AsyncClient) -> None:
    headers = await project.admin()
    answer = problem(
        await client.put(
            "/api/v1/scorers/s/versions/1",
            json={"definition": {}, "score_range": [1, 0]},
            headers=headers,
        ),
        422,
    )
    assert answer["errors"][0]["msg"] == "score_range must be [lo, hi] with lo < hi"
    assert "Value error" not in answer["detail"]
    peer = await project.token(kind="peer")
    answer = problem(
        await client.post(
            "/project/api/peer/report", json={}, headers={"Authorization": f"Bearer {peer}"}
        ),
        422,
    )
    assert answer["detail"] == "body: send exactly one of report_id or evaluation_id"


async def test_an_ndjson_conflict_names_the_line(
    project: Project, client: httpx.AsyncClient
) -> None:
    headers = await project.admin()
    await define_suite(client, headers)
    started = await start_evaluation(
        client, headers, subject={"digest": "sha1:" + "a" * 40}, mode="experiment"
    )
    url = f"/api/v1/evaluations/{started['evaluation_id']}/cases"
    ndjson = {**headers, "Content-Type": "application/x-ndjson"}
    first = b'{"check_id": "accuracy", "example_id": "e00", "repeat": 0, "status": "pass"}\n'
    assert (await client.post(url, content=first, headers=ndjson)).status_code == 200
    again = first + first.replace(b'"pass"', b'"fail"')
    answer = problem(await client.post(url, content=again, headers=ndjson), 409)
    assert answer["index"] == 2
    assert answer["detail"].startswith("line 2 differs from the stored case")
    assert answer["detail"].endswith("in: status")


def test_the_command_line_names_options_and_warns_of_nothing(database_url: str) -> None:
    assert run_cli(database_url, "project", "create", "msg-org/msg").returncode == 0
    refused = run_cli(
        database_url,
        "token",
        "create",
        "--project",
        "msg-org/msg",
        "--name",
        "x",
        "--permissions",
        "everything",
    )
    assert refused.returncode == 64  # an option value the command cannot use (app/domain/exits.py)
    assert refused.stderr.strip() == (
        "evalbook: --permissions: unknown permission 'everything' (one of: suite.write, "
        "dataset.write, scorer.write, evaluation.write, report.read, report.export, label.write, "
        "board.write, dataset.read_body, peer.manage, admin)"
    )
    assert "Warning" not in refused.stderr


async def test_an_ndjson_refusal_names_the_line_not_a_case(
    project: Project, client: httpx.AsyncClient
) -> None:
    headers = await project.admin()
    await define_suite(client, headers)
    user = {"Authorization": f"Bearer {await project.token('evaluation.write')}"}
    started = await start_evaluation(
        client, user, subject={"digest": "sha1:" + "b" * 40}, mode="experiment"
    )
    url = f"/api/v1/evaluations/{started['evaluation_id']}/cases"
    lines = (
        b'{"check_id": "accuracy", "example_id": "e00", "repeat": 0, "status": "pass"}\n'
        b'{"check_id": "accuracy", "example_id": "e01", "repeat": 0, "status": "pass",'
        b' "assurance": "platform_verified"}\n'
    )
    answer = problem(
        await client.post(
            url, content=lines, headers={**user, "Content-Type": "application/x-ndjson"}
        ),
        403,
    )
    assert answer["index"] == 2 and answer["detail"].startswith("line 2 claims assurance")
