"""A board computed from stored reports (issue 54, the computing layer): four subjects' current
gate reports on the standard suite, each subject's per-example values read from its cases,
checked against the reports' own scores and against a plain recomputation of the pairs from the
cases sent; and the refusals."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from statsmodels.stats.contingency_tables import mcnemar

from app.aggregation.board_body import BoardMeta, board_body
from app.aggregation.rounding import r12
from app.api.state import state_of
from app.digest.canonical import canonical_and_digest, is_canonical
from app.domain.errors import NotFound, ValidationFailed
from app.identity.auth import principal_for
from app.services.boards import compute_board
from tests.conftest import Project
from tests.factories import BOARD_FIELD as FIELD
from tests.factories import define_suite, issue_board_subject, problem


async def _board(app: FastAPI, token: str, check: str, subjects: list[str] | None) -> Any:
    state = state_of(app)
    principal = await principal_for(token, state.principals, state.reader_pool)
    assert principal is not None
    async with state.sessionmaker() as session, session.begin():
        computed = await compute_board(
            session,
            principal,
            state.suite_cache,
            ("rag", "1", check),
            subjects,
            0.05,
            state.reader_pool,
        )
        return computed.board


async def test_a_board_of_stored_reports(
    project: Project, client: httpx.AsyncClient, app: FastAPI
) -> None:
    headers = await project.admin()
    await define_suite(client, headers)
    reports = {subject: await issue_board_subject(client, headers, subject) for subject in FIELD}
    token = await project.token("report.read")

    board = await _board(app, token, "accuracy", None)
    assert board.test == "mcnemar_exact" and board.excluded == []
    scores = {
        s: next(c for c in r["body"]["checks"] if c["check_id"] == "accuracy")["score"]
        for s, r in reports.items()
    }
    assert [p.entrant.subject for p in board.placed] == sorted(FIELD, key=lambda s: (-scores[s], s))
    for placed in board.placed:
        assert placed.entrant.score == scores[placed.entrant.subject]
        assert placed.entrant.report_id == reports[placed.entrant.subject]["report_id"]
    for pair in board.pairs:
        first, second = FIELD[pair.first][0], FIELD[pair.second][0]
        b, c = len(second - first), len(first - second)  # first passed, second failed; reverse
        assert (pair.n, pair.b, pair.c) == (12, b, c)
        assert pair.p_value == r12(mcnemar([[0, b], [c, 0]], exact=True).pvalue)

    body = board_body(board, BoardMeta("b1", {"name": "rag", "version": "1"}, "accuracy", "now"))
    data, digest = canonical_and_digest(body)
    assert is_canonical(data) and digest.startswith("sha256:")
    for entry in body["subjects"]:
        report = reports[entry["subject"]]
        check = next(c for c in report["body"]["checks"] if c["check_id"] == "accuracy")
        assert (entry["report_digest"], entry["interval"]) == (report["digest"], check["interval"])
        assert entry["rank_interval"][0] <= entry["rank"] <= entry["rank_interval"][1]
    assert all({"b", "c"} <= set(p) and "mean_difference" not in p for p in body["pairs"])
    assert body["methods"] == {"pairwise": "mcnemar_exact", "correction": "holm"}

    means = await _board(app, token, "helpfulness", list(FIELD)[:3])
    assert means.test == "paired_t" and len(means.placed) == 3
    (best, *_), (worst, *_) = (
        [p.entrant.subject for p in means.placed],
        [p.entrant.subject for p in reversed(means.placed)],
    )
    assert best == "sha1:" + "1" * 40 and worst == "sha1:" + "3" * 40
    assert all(p.mean_difference is not None for p in means.pairs)
    gap = next(p for p in means.pairs if {p.first, p.second} == {best, worst})
    assert gap.better == best and gap.mean_difference == pytest.approx(0.5 - 0.9)


async def test_a_board_refuses_what_it_should(
    project: Project, client: httpx.AsyncClient, app: FastAPI
) -> None:
    headers = await project.admin()
    await define_suite(client, headers)
    first = next(iter(FIELD))
    await issue_board_subject(client, headers, first)
    token = await project.token("report.read")
    with pytest.raises(ValidationFailed, match="2 to 200 subjects"):
        await _board(app, token, "accuracy", None)
    with pytest.raises(ValidationFailed, match="without a current gate report"):
        await _board(app, token, "accuracy", [first, "sha1:" + "9" * 40])
    with pytest.raises(ValidationFailed, match="each subject once"):
        await _board(app, token, "accuracy", [first, first])
    with pytest.raises(ValidationFailed, match="not a check"):
        await _board(app, token, "nope", None)
    state = state_of(app)
    principal = await principal_for(token, state.principals, state.reader_pool)
    assert principal is not None
    async with state.sessionmaker() as session, session.begin():
        with pytest.raises(NotFound):
            await compute_board(
                session,
                principal,
                state.suite_cache,
                ("rag", "9", "accuracy"),
                None,
                0.05,
                state.reader_pool,
            )
    problem(await client.get("/api/v1/suites/rag/versions/9", headers=headers), 404)
