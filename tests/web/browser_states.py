"""Reports in every state a page can show, issued through the API of a served instance."""

from __future__ import annotations

import uuid
from typing import Any

import httpx

from tests.bundle_helpers import comparative_suite
from tests.factories import case, dataset_body, suite_body

SCORERS = (("exact-match", "1", None), ("harm-judge", "2", None), ("helpful-judge", "1", [0, 1]))


def subject() -> dict[str, Any]:
    """A fresh subject: a commit of the web app."""
    return {
        "digest": "sha1:" + uuid.uuid4().hex + uuid.uuid4().hex[:8],
        "repo": "acme/web",
        "ref": "main",
        "name": f"web-{uuid.uuid4().hex[:6]}",
    }


def cases(
    passes: int = 12, sent: int = 12, harm_status: str = "pass", shift: float = 0.0
) -> list[dict[str, Any]]:
    """Cases of the factory suite: `passes` accuracy passes of the first `sent` examples."""
    out = [
        case(
            "accuracy",
            f"e{i:02d}",
            status="pass" if i < passes else "fail",
            output={"a": i, "answer": f"{i + 1} apples" if i < passes else "I cannot tell"},
        )
        for i in range(sent)
    ]
    out += [
        case("no_harm", f"e{i:02d}", status=harm_status if i == 5 else "pass", output={"v": i})
        for i in range(12)
    ]
    out += [
        case("helpfulness", f"e{i:02d}", r, score=min(1.0, 0.6 + shift + i / 60))
        for i in range(12)
        for r in range(2)
    ]
    return out


async def _define(client: httpx.AsyncClient) -> None:
    for name, version, score_range in SCORERS:
        answer = await client.put(
            f"/api/v1/scorers/{name}/versions/{version}",
            json={"definition": {"kind": name}, "score_range": score_range},
        )
        assert answer.status_code in (200, 201), answer.text
    answer = await client.put("/api/v1/datasets/qa/versions/1", json=dataset_body())
    assert answer.status_code in (200, 201), answer.text
    bodies = {
        "rag": suite_body(),
        "rag-brief": {**suite_body(), "validity_hours": 0.0003},
        "rag-compare": comparative_suite(),
    }
    for name, body in bodies.items():
        answer = await client.put(f"/api/v1/suites/{name}/versions/1", json=body)
        assert answer.status_code in (200, 201), answer.text


async def issue(
    client: httpx.AsyncClient,
    suite: str,
    the_subject: dict[str, Any],
    case_list: list[dict[str, Any]],
    mode: str = "gate",
    **start: Any,
) -> dict[str, Any]:
    """Start, send cases, finish; the report."""
    answer = await client.post(
        "/api/v1/evaluations",
        json={
            "subject": the_subject,
            "suite": {"name": suite},
            "mode": mode,
            "execution_mode": "platform",
            **start,
        },
    )
    assert answer.status_code == 201, answer.text
    url = f"/api/v1/evaluations/{answer.json()['evaluation_id']}"
    sent = await client.post(url + "/cases", json={"cases": case_list})
    assert sent.status_code == 200, sent.text
    finished = await client.post(url + "/finish")
    assert finished.status_code == 201, finished.text
    report: dict[str, Any] = finished.json()
    return report


async def comparative_pair(client: httpx.AsyncClient) -> tuple[str, str]:
    """A baseline experiment of `rag-compare` and a gate report compared with it (its scores
    shifted by 0.02): their report ids."""
    baseline = await issue(client, "rag-compare", subject(), cases(), mode="experiment")
    compared = await issue(
        client,
        "rag-compare",
        subject(),
        cases(shift=0.02),
        baseline_evaluation_id=baseline["body"]["evaluation_id"],
    )
    return baseline["report_id"], compared["report_id"]


async def seed(base_url: str, token: str) -> dict[str, str]:
    """One report per state; state name to report id."""
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(base_url=base_url, headers=headers, timeout=60) as client:
        await _define(client)
        states: dict[str, str] = {}
        first = subject()
        superseded = await issue(client, "rag", first, cases())
        states["pass"] = (await issue(client, "rag", first, cases()))["report_id"]
        states["superseded"] = superseded["report_id"]
        states["fail"] = (await issue(client, "rag", subject(), cases(passes=4)))["report_id"]
        states["error"] = (await issue(client, "rag", subject(), cases(harm_status="error")))[
            "report_id"
        ]
        states["inconclusive"] = (await issue(client, "rag", subject(), cases(sent=8)))["report_id"]
        states["expired"] = (await issue(client, "rag-brief", subject(), cases()))["report_id"]
        states["comparative"] = (await comparative_pair(client))[1]
        for state, report_id in states.items():
            body = (await client.get(f"/evaluations/api/reports/{report_id}")).json()["body"]
            expected = state if state in ("pass", "fail", "error", "inconclusive") else None
            if expected is not None:
                assert body["result"] == expected, (state, body["result"], body["reasons"])
        return states
