"""A judged suite through the API (docs/judges.md): its definitions, a judge's cases, and the
labels of a seeded world where the judge is lenient."""

from __future__ import annotations

import hashlib
from typing import Any

import httpx
import numpy as np

from tests.factories import case, start_evaluation

EXAMPLES = [f"q{i:03d}" for i in range(200)]
CALIBRATION = {"method": "ppi", "label_fraction": 0.25, "min_labels": 10}


def plain_draw(seed: str, check_id: str, example_id: str) -> float:
    """The sample draw of docs/judges.md, section 2, written out as a plain loop would."""
    message = b"evalbook.label-sample.v1\0" + seed.encode() + b"\0" + check_id.encode() + b"\0"
    digest = hashlib.sha256(message + example_id.encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def sampled(check_id: str, fraction: float = 0.25, seed: str = "qa") -> list[str]:
    """The examples a judged check of the helpers' suite asks labels for."""
    return [e for e in EXAMPLES if plain_draw(seed, check_id, e) < fraction]


def judged_suite(rule: str = "threshold", **calibration: Any) -> dict[str, Any]:
    """A judged pass_rate check and a judged mean check on one dataset, and an unjudged one."""
    judged = {**CALIBRATION, **calibration}
    return {
        "validity_hours": 168,
        "decision_rule": {"rule": rule, "alpha": 0.05, "margin": 0.05},
        "checks": [
            {
                "check_id": "accuracy",
                "scorer": {"name": "llm-judge", "version": "1"},
                "dataset": {"name": "qa", "version": "1"},
                "aggregation": {"method": "pass_rate", "threshold": 0.75},
                "calibration": judged,
            },
            {
                "check_id": "helpfulness",
                "scorer": {"name": "rater", "version": "1"},
                "dataset": {"name": "qa", "version": "1"},
                "aggregation": {"method": "mean", "threshold": 0.5},
                "calibration": judged,
            },
            {
                "check_id": "format",
                "required": False,
                "scorer": {"name": "llm-judge", "version": "1"},
                "dataset": {"name": "qa", "version": "1"},
                "aggregation": {"method": "pass_rate", "threshold": 0.5},
            },
        ],
    }


async def define_judged(
    client: httpx.AsyncClient, headers: dict[str, str], body: dict[str, Any] | None = None
) -> httpx.Response:
    """The scorers, the dataset and the judged suite version; the suite PUT's answer."""
    for name, score_range in (("llm-judge", None), ("rater", [0, 1])):
        response = await client.put(
            f"/api/v1/scorers/{name}/versions/1",
            json={"definition": {"kind": name}, "score_range": score_range},
            headers=headers,
        )
        assert response.status_code in (200, 201), response.text
    examples = [{"id": e, "body": {"q": f"question {e}"}, "tags": []} for e in EXAMPLES]
    response = await client.put(
        "/api/v1/datasets/qa/versions/1", json={"examples": examples}, headers=headers
    )
    assert response.status_code in (200, 201), response.text
    return await client.put(
        "/api/v1/suites/judged/versions/1", json=body or judged_suite(), headers=headers
    )


def world(seed: int = 5) -> tuple[dict[str, bool], dict[str, bool], dict[str, float]]:
    """Truth, a lenient judge's verdicts (passing 40 % of the bad answers), and a rater's
    scores a little above the truth's."""
    rng = np.random.default_rng(seed)
    truth, judge, rater = {}, {}, {}
    for example in EXAMPLES:
        good = bool(rng.random() < 0.7)
        truth[example] = good
        judge[example] = good or bool(rng.random() < 0.4)
        rater[example] = round(float(np.clip(0.5 * good + 0.25 + rng.normal(0, 0.05), 0, 1)), 6)
    return truth, judge, rater


def judged_cases(judge: dict[str, bool], rater: dict[str, float]) -> list[dict[str, Any]]:
    """The judge's and the rater's cases, and the unjudged check's."""
    cases = [
        case("accuracy", e, status="pass" if ok else "fail", output={"a": e})
        for e, ok in judge.items()
    ]
    cases += [case("helpfulness", e, score=score, output={"h": e}) for e, score in rater.items()]
    cases += [case("format", e, output={"f": e}) for e in EXAMPLES]
    return cases


def true_labels(truth: dict[str, bool], examples: list[str], labeller: str = "ana") -> list[dict]:
    """Pass/fail labels of the accuracy check, as a careful human would give them."""
    return [
        {
            "check_id": "accuracy",
            "example_id": e,
            "label": "pass" if truth[e] else "fail",
            "labeller": labeller,
        }
        for e in examples
    ]


async def judged_report(
    client: httpx.AsyncClient,
    headers: dict[str, str],
    labeller: dict[str, str] | None,
    labels: list[dict[str, Any]],
    seed: int = 5,
    **start: Any,
) -> dict[str, Any]:
    """An evaluation of the judged suite: the world's cases, these labels (sent with the
    labeller's headers), finished; the report."""
    evaluation = await start_evaluation(client, headers, suite="judged", **start)
    url = f"/api/v1/evaluations/{evaluation['evaluation_id']}"
    _, judge, rater = world(seed)
    sent = await client.post(
        f"{url}/cases", json={"cases": judged_cases(judge, rater)}, headers=headers
    )
    assert sent.status_code == 200, sent.text
    if labels:
        assert labeller is not None
        posted = await client.post(f"{url}/labels", json={"labels": labels}, headers=labeller)
        assert posted.status_code == 200, posted.text
    done = await client.post(f"{url}/finish", headers=headers)
    assert done.status_code == 201, done.text
    report: dict[str, Any] = done.json()
    return report
