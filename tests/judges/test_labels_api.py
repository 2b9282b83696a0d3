"""Labels through the service (docs/judges.md, sections 1 and 2): judged suites and their
refusals, the requested sample against a plain loop, posting labels on both lanes with the
labeller token, every refusal leaving nothing stored, and a race of two posts."""

from __future__ import annotations

import asyncio
import copy
import uuid
from typing import Any

import httpx
import pytest
from sqlalchemy import text

from tests.conftest import Project, auth
from tests.factories import problem, start_evaluation
from tests.judges.helpers import (
    EXAMPLES,
    define_judged,
    judged_cases,
    judged_suite,
    sampled,
    true_labels,
    world,
)


async def _stored_labels(project: Project, evaluation_id: str) -> int:
    async with project.db() as session:
        found = await session.execute(
            text("SELECT count(*) FROM labels WHERE evaluation_id = :id"), {"id": evaluation_id}
        )
        return int(found.scalar_one())


async def _running(project: Project, client: httpx.AsyncClient) -> tuple[dict[str, str], str]:
    headers = await project.admin()
    response = await define_judged(client, headers)
    assert response.status_code == 201, response.text
    evaluation = await start_evaluation(client, headers, suite="judged")
    _, judge, rater = world()
    sent = await client.post(
        f"/api/v1/evaluations/{evaluation['evaluation_id']}/cases",
        json={"cases": judged_cases(judge, rater)},
        headers=headers,
    )
    assert sent.status_code == 200, sent.text
    return headers, evaluation["evaluation_id"]


async def test_a_judged_suite_freezes_its_calibration(
    project: Project, client: httpx.AsyncClient
) -> None:
    headers = await project.admin()
    response = await define_judged(client, headers)
    assert response.status_code == 201, response.text
    checks = response.json()["content"]["checks"]
    assert checks[0]["calibration"] == {
        "method": "ppi",
        "label_fraction": 0.25,
        "min_labels": 10,
        "sample_seed": "qa",
    }
    assert "calibration" not in checks[2]


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda c: c["aggregation"].update(method="all_pass", threshold=None), "checks.0"),
        (lambda c: c.update(repeats=2), "checks.0"),
        (lambda c: c.update(cluster_tag_prefix="passage:"), "checks.0"),
        (lambda c: c["calibration"].update(label_fraction=0.0), "label_fraction"),
        (lambda c: c["calibration"].update(label_fraction=1.5), "label_fraction"),
        (lambda c: c["calibration"].update(min_labels=1), "min_labels"),
        (lambda c: c["calibration"].update(sample_seed="s" * 201), "sample_seed"),
        (lambda c: c["calibration"].update(method="bootstrap"), "method"),
        (lambda c: c["calibration"].update(extra=1), "extra"),
        # 0.1 of 200 examples expects 20 labels, below 30.
        (lambda c: c["calibration"].update(label_fraction=0.1, min_labels=30), "label_fraction"),
    ],
)
async def test_calibration_is_refused_where_it_is_not_defined(
    project: Project, client: httpx.AsyncClient, change: Any, field: str
) -> None:
    headers = await project.admin()
    body = judged_suite()
    change(body["checks"][0])
    found = problem(await define_judged(client, headers, body), 422)
    assert field in found["detail"] or any(field in str(e["loc"]) for e in found["errors"])
    listed = await client.get("/api/v1/suites/judged", headers=headers)
    assert listed.status_code == 404


async def test_the_requested_labels_are_the_plain_loops_sample(
    project: Project, client: httpx.AsyncClient
) -> None:
    headers, evaluation_id = await _running(project, client)
    url = f"/api/v1/evaluations/{evaluation_id}/labels/requested"
    seen: list[tuple[str, str]] = []
    cursor = None
    while True:
        params: dict[str, Any] = {"limit": 17}
        if cursor:
            params["cursor"] = cursor
        page = await client.get(url, params=params, headers=headers)
        assert page.status_code == 200, page.text
        body = page.json()
        seen += [(r["check_id"], r["example_id"]) for r in body["requested"]]
        assert all(r["input"] == {"q": f"question {r['example_id']}"} for r in body["requested"])
        assert all(r["output"] is not None and not r["labelled"] for r in body["requested"])
        cursor = body["next_cursor"]
        if cursor is None:
            break
    expected = [("accuracy", e) for e in sampled("accuracy")]
    expected += [("helpfulness", e) for e in sampled("helpfulness")]
    assert seen == expected
    assert body["totals"]["accuracy"] == {"sampled": len(sampled("accuracy")), "labelled": 0}
    # A labeller without dataset.read_body sees what to label, not the bodies.
    labeller = auth(await project.token("label.write", kind="labeller"))
    page = await client.get(url, headers=labeller)
    assert page.status_code == 200
    assert all(r["input"] is None and r["output"] is None for r in page.json()["requested"])
    assert problem(await client.get(url, params={"cursor": "nope"}, headers=headers), 400)
    no_rights = auth(await project.token("dataset.write"))
    problem(await client.get(url, headers=no_rights), 403)


async def test_labels_are_taken_once_idempotently_on_both_lanes(
    project: Project, client: httpx.AsyncClient
) -> None:
    headers, evaluation_id = await _running(project, client)
    truth, _, _ = world()
    labeller = auth(await project.token("label.write", kind="labeller"))
    url = f"/api/v1/evaluations/{evaluation_id}/labels"
    first = true_labels(truth, sampled("accuracy")[:10])
    response = await client.post(url, json={"labels": first}, headers=labeller)
    assert response.status_code == 200, response.text
    assert response.json() == {"accepted": 10, "unchanged": 0}
    again = await client.post(url, json={"labels": first}, headers=labeller)
    assert again.json() == {"accepted": 0, "unchanged": 10}
    lines = b"\n".join(
        httpx.Request("POST", "/", json=item).content
        for item in true_labels(truth, sampled("accuracy")[8:14])
    )
    ndjson = await client.post(
        url, content=lines, headers={**labeller, "Content-Type": "application/x-ndjson"}
    )
    assert ndjson.status_code == 200, ndjson.text
    assert ndjson.json() == {"accepted": 4, "unchanged": 2}
    changed = copy.deepcopy(first[:1])
    changed[0]["label"] = "fail" if changed[0]["label"] == "pass" else "pass"
    conflict = problem(await client.post(url, json={"labels": changed}, headers=labeller), 409)
    assert sampled("accuracy")[0] in conflict["detail"]
    mean_label = {
        "check_id": "helpfulness",
        "example_id": sampled("helpfulness")[0],
        "label": 0.75,
        "labeller": "ana",
        "note": "clear, but long",
    }
    response = await client.post(url, json={"labels": [mean_label]}, headers=labeller)
    assert response.json() == {"accepted": 1, "unchanged": 0}
    assert await _stored_labels(project, evaluation_id) == 15
    requested = await client.get(f"{url}/requested", headers=headers)
    assert requested.json()["totals"]["accuracy"]["labelled"] == 14


def _bad_labels(outside: str, inside: str, mean_inside: str) -> list[tuple[str, Any, int, str]]:
    """(what, body, status, a word the problem must say)."""
    good = {"check_id": "accuracy", "example_id": inside, "label": "pass", "labeller": "ana"}
    return [
        ("outside the sample", {**good, "example_id": outside}, 422, outside),
        ("an unjudged check", {**good, "check_id": "format"}, 422, "not judged"),
        ("an unknown check", {**good, "check_id": "nope"}, 422, "nope"),
        ("an unknown example", {**good, "example_id": "zz"}, 422, "zz"),
        ("a number on a pass_rate check", {**good, "label": 1}, 422, "pass or fail"),
        (
            "a word on a mean check",
            {**good, "check_id": "helpfulness", "example_id": mean_inside},
            422,
            "number",
        ),
        (
            "a number outside the score range",
            {**good, "check_id": "helpfulness", "example_id": mean_inside, "label": 1.5},
            422,
            "score_range",
        ),
        ("another word", {**good, "label": "maybe"}, 422, "label"),
        ("a missing labeller", {k: v for k, v in good.items() if k != "labeller"}, 422, "labeller"),
        ("a wrong type", {**good, "example_id": 7}, 422, "example_id"),
        ("a NUL in the note", {**good, "note": "a\u0000b"}, 422, "note"),
        ("a long note", {**good, "note": "n" * 2001}, 422, "note"),
        ("an unknown field", {**good, "extra": 1}, 422, "extra"),
    ]


async def test_bad_labels_are_refused_and_nothing_is_stored(
    project: Project, other_project: Project, client: httpx.AsyncClient
) -> None:
    headers, evaluation_id = await _running(project, client)
    url = f"/api/v1/evaluations/{evaluation_id}/labels"
    outside = next(e for e in EXAMPLES if e not in sampled("accuracy"))
    inside = sampled("accuracy")[0]
    good = {"check_id": "accuracy", "example_id": inside, "label": "pass", "labeller": "ana"}
    for what, bad, status, word in _bad_labels(outside, inside, sampled("helpfulness")[0]):
        # The bad label rides with a good one: the good one is not kept either.
        response = await client.post(url, json={"labels": [good, bad]}, headers=headers)
        found = problem(response, status)
        assert word in found["detail"] or word in str(found.get("errors")), (what, found)
    raw = [
        (b'{"labels": [{"check_id": "accuracy", "check_id": "x"}]}', 422, "duplicate"),
        (b'{"labels": [{"label": NaN}]}', 422, "json"),
        (b'{"labels": [{"label": 1e400}]}', 422, "not finite"),
        (b'{"labels": [{"note": "\\ud800"}]}', 422, "surrogate"),
        (b'{"labels": []}', 422, "labels"),
        (b"[", 422, "json"),
    ]
    for body, status, word in raw:
        response = await client.post(
            url, content=body, headers={**headers, "Content-Type": "application/json"}
        )
        found = problem(response, status)
        assert word in found["detail"].lower(), (body, found)
    oversize = b'{"labels": [' + b" " * (3 * 1024 * 1024) + b"]}"
    problem(
        await client.post(
            url, content=oversize, headers={**headers, "Content-Type": "application/json"}
        ),
        413,
    )
    problem(
        await client.post(
            url.replace(evaluation_id, "0" * 8 + "-0000-4000-8000-" + "0" * 12),
            json={"labels": [good]},
            headers=headers,
        ),
        404,
    )
    elsewhere = await other_project.admin()
    problem(await client.post(url, json={"labels": [good]}, headers=elsewhere), 404)
    reader = auth(await project.token("report.read"))
    problem(await client.post(url, json={"labels": [good]}, headers=reader), 403)
    # A user token may hold label.write, but its labels would only be `reported`.
    weak = auth(await project.token("label.write"))
    found = problem(await client.post(url, json={"labels": [good]}, headers=weak), 403)
    assert "labeller" in found["detail"]
    assert await _stored_labels(project, evaluation_id) == 0


async def test_a_labeller_token_cannot_post_cases_or_hold_more(
    project: Project, client: httpx.AsyncClient
) -> None:
    headers, evaluation_id = await _running(project, client)
    labeller = auth(await project.token("label.write", "report.read", kind="labeller"))
    response = await client.post(
        f"/api/v1/evaluations/{evaluation_id}/cases",
        json={
            "cases": [{"check_id": "format", "example_id": "q000", "repeat": 0, "status": "pass"}]
        },
        headers=labeller,
    )
    problem(response, 403)
    created = await client.post(
        "/api/v1/tokens",
        json={"name": "l", "permissions": ["label.write", "evaluation.write"], "kind": "labeller"},
        headers=headers,
    )
    assert "labeller token holds only" in problem(created, 422)["detail"]
    # Made through the API without an assurance, a labeller token attests what its labels need.
    created = await client.post(
        "/api/v1/tokens",
        json={"name": "l", "permissions": ["label.write"], "kind": "labeller"},
        headers=headers,
    )
    assert created.status_code == 201, created.text
    assert created.json()["assurance"] == "human_attested"
    truth, _, _ = world()
    posted = await client.post(
        f"/api/v1/evaluations/{evaluation_id}/labels",
        json={"labels": true_labels(truth, sampled("accuracy")[:1])},
        headers=auth(created.json()["token"]),
    )
    assert posted.json() == {"accepted": 1, "unchanged": 0}, posted.text


async def test_labels_are_frozen_once_the_evaluation_finishes(
    project: Project, client: httpx.AsyncClient
) -> None:
    headers, evaluation_id = await _running(project, client)
    truth, _, _ = world()
    url = f"/api/v1/evaluations/{evaluation_id}/labels"
    labels = true_labels(truth, sampled("accuracy")[:3])
    assert (await client.post(url, json={"labels": labels[:2]}, headers=headers)).status_code == 200
    done = await client.post(f"/api/v1/evaluations/{evaluation_id}/finish", headers=headers)
    assert done.status_code == 201, done.text
    found = problem(await client.post(url, json={"labels": labels}, headers=headers), 409)
    assert "finished" in found["detail"]
    assert await _stored_labels(project, evaluation_id) == 2


@pytest.mark.server
async def test_the_database_refuses_a_label_after_finish_and_any_change(
    project: Project, client: httpx.AsyncClient
) -> None:
    headers, evaluation_id = await _running(project, client)
    truth, _, _ = world()
    url = f"/api/v1/evaluations/{evaluation_id}/labels"
    labels = true_labels(truth, sampled("accuracy")[:2])
    assert (await client.post(url, json={"labels": labels[:1]}, headers=headers)).status_code == 200
    async with project.db() as session:
        with pytest.raises(Exception, match="frozen once written"):
            async with session.begin():
                await session.execute(
                    text("UPDATE labels SET label = '\"fail\"' WHERE evaluation_id = :id"),
                    {"id": evaluation_id},
                )
    # The keys of the evaluation and the token hold once a statement (no foreign keys).
    insert = (
        "INSERT INTO labels (evaluation_id, check_id, example_id, label, value, labeller, "
        "assurance, token_id) VALUES (:id, 'accuracy', :ex, '\"pass\"', 1, 'x', "
        "'human_attested', :token)"
    )
    async with project.db() as session, session.begin():
        token = (
            await session.execute(
                text("SELECT created_by_token_id FROM evaluations WHERE id = :id"),
                {"id": evaluation_id},
            )
        ).scalar_one()
    async with project.db() as session:
        for values, message in (
            ({"id": evaluation_id, "token": uuid.uuid4()}, "token that does not exist"),
            ({"id": uuid.uuid4(), "token": token}, "while the evaluation runs"),
        ):
            with pytest.raises(Exception, match=message):
                async with session.begin():
                    await session.execute(text(insert), {**values, "ex": sampled("accuracy")[1]})
    done = await client.post(f"/api/v1/evaluations/{evaluation_id}/finish", headers=headers)
    assert done.status_code == 201
    async with project.db() as session:
        with pytest.raises(Exception, match="while the evaluation runs"):
            async with session.begin():
                await session.execute(
                    text(
                        "INSERT INTO labels (evaluation_id, check_id, example_id, label, value, "
                        "labeller, assurance, token_id) SELECT :id, 'accuracy', :ex, '\"pass\"', "
                        "1, 'x', 'human_attested', created_by_token_id FROM evaluations "
                        "WHERE id = :id"
                    ),
                    {"id": evaluation_id, "ex": sampled("accuracy")[1]},
                )
        with pytest.raises(Exception, match="append-only"):
            async with session.begin():
                await session.execute(
                    text("DELETE FROM labels WHERE evaluation_id = :id"), {"id": evaluation_id}
                )


@pytest.mark.server
async def test_two_posts_racing_for_one_example_store_one_label(
    project: Project, client: httpx.AsyncClient
) -> None:
    headers, evaluation_id = await _running(project, client)
    url = f"/api/v1/evaluations/{evaluation_id}/labels"
    example = sampled("accuracy")[0]
    for round_ in range(5):
        example = sampled("accuracy")[round_]
        posts = [
            {"check_id": "accuracy", "example_id": example, "label": label, "labeller": "ana"}
            for label in ("pass", "fail")
        ]
        answers = await asyncio.gather(
            *(client.post(url, json={"labels": [p]}, headers=headers) for p in posts)
        )
        assert sorted(a.status_code for a in answers) == [200, 409], [a.text for a in answers]
        # Two identical posts of another example: one stores, the other finds it unchanged.
        other = {**posts[0], "example_id": sampled("accuracy")[round_ + 5]}
        same = await asyncio.gather(
            *(client.post(url, json={"labels": [other]}, headers=headers) for _ in range(2))
        )
        assert all(a.status_code == 200 for a in same), [a.text for a in same]
        assert sorted(a.json()["accepted"] for a in same) == [0, 1]
    assert await _stored_labels(project, evaluation_id) == 10
