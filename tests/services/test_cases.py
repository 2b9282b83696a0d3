"""Case ingestion: JSON and NDJSON, all or nothing, idempotent re-sends, large outputs."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import httpx
import orjson
import pytest
from sqlalchemy import text, update

from app.digest.canonical import canonical_bytes, digest_of
from app.models import Evaluation
from tests.conftest import Project
from tests.factories import case, define_suite, problem, start_evaluation

# Depends on the server's own behaviour: run again on the external PostgreSQL.
pytestmark = pytest.mark.server

NDJSON = {"Content-Type": "application/x-ndjson"}


async def stored(db, evaluation_id: str) -> list[tuple[Any, ...]]:
    async with db() as session:
        result = await session.execute(
            text(
                "SELECT check_id, example_id, repeat, status, score, coalesce(c.output, o.output),"
                " output_digest,"
                " output_key, scorer_version FROM cases c"
                " LEFT JOIN case_outputs o USING (evaluation_id, check_id, example_id, repeat)"
                " WHERE evaluation_id = :id ORDER BY check_id, example_id, repeat"
            ),
            {"id": evaluation_id},
        )
        return [tuple(row) for row in result]


@pytest.fixture
async def running(project: Project, client: httpx.AsyncClient) -> dict[str, Any]:
    headers = await project.admin()
    await define_suite(client, headers)
    evaluation = await start_evaluation(client, headers)
    return {
        "headers": headers,
        "id": evaluation["evaluation_id"],
        "url": f"/api/v1/evaluations/{evaluation['evaluation_id']}/cases",
    }


async def test_json_batch_resend_and_conflict(running, client: httpx.AsyncClient, db) -> None:
    batch = {
        "cases": [
            case("accuracy", "e00", output={"answer": "a"}),
            case(
                "helpfulness",
                "e00",
                1,
                score=0.5,
                evidence_refs=["sha256:" + "a" * 64],
                trace_ref={"id": "t1", "digest": "sha256:" + "b" * 64},
            ),
        ]
    }
    first = await client.post(running["url"], json=batch, headers=running["headers"])
    assert first.status_code == 200 and first.json() == {"accepted": 2, "unchanged": 0}
    again = await client.post(running["url"], json=batch, headers=running["headers"])
    assert again.json() == {"accepted": 0, "unchanged": 2}
    rows = await stored(db, running["id"])
    assert rows[0][:4] == ("accuracy", "e00", 0, "pass")
    assert rows[0][5] == canonical_bytes({"answer": "a"}).decode()
    assert rows[0][6] == digest_of({"answer": "a"})
    assert rows[1][4] == 0.5 and rows[1][8] == "1"
    changed = {
        "cases": [
            case("accuracy", "e01"),
            case("accuracy", "e00", status="fail", output={"answer": "a"}),
        ]
    }
    conflict = problem(
        await client.post(running["url"], json=changed, headers=running["headers"]), 409
    )
    assert conflict["index"] == 1
    assert conflict["detail"].endswith("in: status")
    rescored = {"cases": [case("accuracy", "e00", output={"answer": "b"}, status="fail")]}
    conflict = problem(
        await client.post(running["url"], json=rescored, headers=running["headers"]), 409
    )
    assert conflict["detail"] == (
        "case 0 differs from the stored case with the same (check, example, repeat) in: "
        "output, status"
    )
    assert len(await stored(db, running["id"])) == 2
    mixed = {"cases": [case("accuracy", "e02"), *batch["cases"]]}
    assert (await client.post(running["url"], json=mixed, headers=running["headers"])).json() == {
        "accepted": 1,
        "unchanged": 2,
    }


async def test_duplicate_inside_one_request(running, client: httpx.AsyncClient, db) -> None:
    same = {"cases": [case("accuracy", "e00"), case("accuracy", "e00")]}
    assert (await client.post(running["url"], json=same, headers=running["headers"])).json() == {
        "accepted": 1,
        "unchanged": 1,
    }
    differing = {"cases": [case("accuracy", "e01"), case("accuracy", "e01", status="fail")]}
    assert (
        problem(await client.post(running["url"], json=differing, headers=running["headers"]), 409)[
            "index"
        ]
        == 1
    )
    assert len(await stored(db, running["id"])) == 1


BAD_CASES = [
    (case("nope", "e00"), "check_id"),
    (case("accuracy", "zz"), "example_id"),
    (case("accuracy", "e00", repeat=1), "repeat"),
    (case("accuracy", "e00", repeat=-1), "repeat"),
    (case("accuracy", "e00", repeat="0"), "repeat"),
    (case("accuracy", "e00", repeat=True), "repeat"),
    (case("accuracy", "e00", status="passed"), "status"),
    (case("accuracy", "e00", status=["pass"]), "status"),
    (case("helpfulness", "e00"), "score"),
    (case("helpfulness", "e00", score=1.5), "score"),
    (case("helpfulness", "e00", score="0.5"), "score"),
    (case("accuracy", "e00", scorer_version="9"), "scorer_version"),
    (case("accuracy", "e00", output_digest="md5:x"), "output_digest"),
    (case("accuracy", "e00", output={"a": 1}, output_digest="sha256:" + "0" * 64), "output_digest"),
    (case("accuracy", "e00", evidence_refs="sha256:x"), "evidence_refs"),
    (case("accuracy", "e00", evidence_refs=["sha256:ABC"]), "evidence_refs"),
    # A digest with a final newline: Python's "$" would match before it.
    (case("accuracy", "e00", output_digest="sha256:" + "0" * 64 + "\n"), "output_digest"),
    (case("accuracy", "e00", evidence_refs=["sha256:" + "a" * 64 + "\n"]), "evidence_refs"),
    (
        case("accuracy", "e00", trace_ref={"id": "t", "digest": "sha256:" + "a" * 64 + "\n"}),
        "trace_ref",
    ),
    (case("accuracy", "e00", trace_ref={"id": "t"}), "trace_ref"),
    (case("accuracy", "e00", assurance="total"), "assurance"),
    (case("accuracy", "e00", colour="red"), "colour"),
    ({"example_id": "e00", "repeat": 0, "status": "pass"}, "check_id"),
    ([1, 2], None),
]


@pytest.mark.parametrize(("bad", "field"), BAD_CASES)
async def test_one_bad_case_refuses_the_batch(
    running, client: httpx.AsyncClient, db, bad, field
) -> None:
    batch = {"cases": [case("accuracy", "e00"), case("accuracy", "e01"), bad]}
    body = problem(await client.post(running["url"], json=batch, headers=running["headers"]), 422)
    assert body["index"] == 2
    expected = ["body", "cases", 2] + ([field] if field else [])
    assert body["errors"][0]["loc"] == expected
    assert await stored(db, running["id"]) == []


@pytest.mark.parametrize(
    "content",
    [
        b'{"cases": [{"check_id": "accuracy", "example_id": "e00", "repeat": 0, "status": "pass", "score": NaN}]}',
        b'{"cases": [{"check_id": "accuracy", "check_id": "no_harm", "example_id": "e00", "repeat": 0, "status": "pass"}]}',
        b'{"cases": [{"check_id": "accuracy", "example_id": "e00", "repeat": 9007199254740993, "status": "pass"}]}',
        b'{"cases": [{"check_id": "accuracy", "example_id": "e00", "repeat": 0, "status": "pass", "output": "\\udfff"}]}',
        b'{"cases": {}}',
        b'{"cases": [], "more": 1}',
        b"not json",
    ],
)
async def test_malformed_json_batches(
    running, client: httpx.AsyncClient, db, content: bytes
) -> None:
    headers = {**running["headers"], "Content-Type": "application/json"}
    problem(await client.post(running["url"], content=content, headers=headers), 422)
    assert await stored(db, running["id"]) == []


async def test_ndjson_stream_and_bad_line(running, client: httpx.AsyncClient, db) -> None:
    lines = [
        orjson.dumps(case("accuracy", f"e{i:02d}", status="pass" if i % 3 else "fail"))
        for i in range(12)
    ]
    ok = await client.post(
        running["url"],
        content=b"\n".join(lines) + b"\n\n",
        headers={**running["headers"], **NDJSON},
    )
    assert ok.json() == {"accepted": 12, "unchanged": 0}
    bad = [orjson.dumps(case("no_harm", f"e{i:02d}")) for i in range(5)]
    bad.insert(3, b'{"check_id": "no_harm", "example_id": "e09", "repeat": 0, "status": "pass",')
    body = problem(
        await client.post(
            running["url"], content=b"\n".join(bad), headers={**running["headers"], **NDJSON}
        ),
        422,
    )
    assert body["index"] == 4 and body["errors"][0]["loc"][0] == "line 4"
    semantic = [orjson.dumps(case("no_harm", "e00")), orjson.dumps(case("no_harm", "e99"))]
    body = problem(
        await client.post(
            running["url"], content=b"\n".join(semantic), headers={**running["headers"], **NDJSON}
        ),
        422,
    )
    assert body["index"] == 2 and body["errors"][0]["loc"] == ["line 2", "example_id"]
    assert len(await stored(db, running["id"])) == 12


async def test_ndjson_line_limit(running, client: httpx.AsyncClient, db, settings) -> None:
    huge = orjson.dumps(
        case("accuracy", "e00", output={"x": "a" * (settings.max_ndjson_line_bytes + 10)})
    )
    content = orjson.dumps(case("accuracy", "e01")) + b"\n" + huge + b"\n"
    body = problem(
        await client.post(
            running["url"], content=content, headers={**running["headers"], **NDJSON}
        ),
        413,
    )
    assert body["index"] == 2
    assert await stored(db, running["id"]) == []


async def test_concurrent_identical_batches_store_each_case_once(
    running, client: httpx.AsyncClient, db
) -> None:
    batch = {
        "cases": [case("accuracy", f"e{i:02d}") for i in range(12)]
        + [case("no_harm", f"e{i:02d}", status="fail") for i in range(12)]
    }
    responses = await asyncio.gather(
        *(client.post(running["url"], json=batch, headers=running["headers"]) for _ in range(10))
    )
    assert {r.status_code for r in responses} == {200}, [r.text for r in responses]
    assert sum(r.json()["accepted"] for r in responses) == 24
    assert sum(r.json()["unchanged"] for r in responses) == 24 * 9
    assert len(await stored(db, running["id"])) == 24


async def test_large_output_goes_to_object_storage(
    running, client: httpx.AsyncClient, db, app
) -> None:
    output = {"text": "x" * 300_000}
    response = await client.post(
        running["url"],
        json={"cases": [case("accuracy", "e00", output=output)]},
        headers=running["headers"],
    )
    assert response.status_code == 200, response.text
    (row,) = await stored(db, running["id"])
    assert row[5] is None and row[6] == digest_of(output)
    assert row[7].endswith(digest_of(output).removeprefix("sha256:") + ".json")
    assert await app.state.resources.object_store.get(row[7]) == canonical_bytes(output)


async def test_cases_after_finish_are_refused(running, client: httpx.AsyncClient, db) -> None:
    async with db() as session, session.begin():
        await session.execute(
            update(Evaluation)
            .where(Evaluation.id == uuid.UUID(running["id"]))
            .values(status="finished")
        )
    problem(
        await client.post(
            running["url"], json={"cases": [case("accuracy", "e00")]}, headers=running["headers"]
        ),
        409,
    )
    problem(
        await client.post(
            "/api/v1/evaluations/00000000-0000-4000-8000-000000000000/cases",
            json={"cases": []},
            headers=running["headers"],
        ),
        404,
    )
    assert await stored(db, running["id"]) == []


async def test_status_counts(running, client: httpx.AsyncClient) -> None:
    await client.post(
        running["url"],
        json={
            "cases": [
                case("accuracy", "e00"),
                case("accuracy", "e01", status="fail"),
                case("no_harm", "e00", status="error"),
            ]
        },
        headers=running["headers"],
    )
    status = (
        await client.get(f"/api/v1/evaluations/{running['id']}", headers=running["headers"])
    ).json()
    assert status["received_cases"] == 3
    assert status["checks"][0]["by_status"] == {"pass": 1, "fail": 1}
    assert status["checks"][1]["by_status"] == {"error": 1}


async def test_ndjson_split_at_any_byte(running, client: httpx.AsyncClient, db) -> None:
    lines = [
        orjson.dumps(case("accuracy", f"e{i:02d}", output={"t": "x" * (i * 50)})) for i in range(12)
    ]
    body = b"\n".join(lines) + b"\n"

    async def pieces(size: int):
        for start in range(0, len(body), size):
            yield body[start : start + size]

    for size in (1, 7, 64, 1000):
        response = await client.post(
            running["url"], content=pieces(size), headers={**running["headers"], **NDJSON}
        )
        assert response.status_code == 200, response.text
    assert len(await stored(db, running["id"])) == 12
    broken = body.replace(b'"e05"', b'"e05",,', 1)

    async def broken_pieces():
        for start in range(0, len(broken), 5):
            yield broken[start : start + 5]

    response = await client.post(
        running["url"], content=broken_pieces(), headers={**running["headers"], **NDJSON}
    )
    assert problem(response, 422)["index"] == 6


async def test_suite_cache_reads_a_dataset_version_once(
    project: Project, client: httpx.AsyncClient, db: Any
) -> None:
    """Checks and suite versions naming one dataset version share its example positions."""
    from app.repositories import definitions as definition_repo
    from app.services.kit.compiled import SuiteCache

    headers = await project.admin()
    await define_suite(client, headers, suite="one")
    await define_suite(client, headers, suite="two")
    cache = SuiteCache(dataset_capacity=1)
    async with db() as session:
        compiled = []
        for name in ("one", "two"):
            suite = await definition_repo.get_suite(session, project.id, name)
            assert suite is not None
            version = await definition_repo.get_suite_version(session, suite.id, "1")
            assert version is not None
            compiled.append(await cache.get(session, version))
    positions = {id(check.example_positions) for c in compiled for check in c.checks.values()}
    assert len(positions) == 1
    first = next(iter(compiled[0].checks.values()))
    examples = await _example_ids(db, first.dataset_version_id)
    assert list(first.example_positions) == sorted(examples, key=str.encode)
    assert list(first.example_positions.values()) == list(range(len(examples)))


async def _example_ids(db: Any, dataset_version_id: uuid.UUID) -> list[str]:
    async with db() as session:
        result = await session.execute(
            text("SELECT example_id FROM examples WHERE dataset_version_id = :id"),
            {"id": dataset_version_id},
        )
        return [row[0] for row in result]


async def test_suite_cache_reads_a_suite_version_once(
    project: Project, client: httpx.AsyncClient, db: Any
) -> None:
    """A suite version never changes: once read, starts, ingests and finishes take it (a copy
    bound to no session, with every column) from the cache without a query."""
    from sqlalchemy import inspect

    from app.models import SuiteVersion
    from app.repositories import definitions as definition_repo
    from app.repositories.raw import driver_of
    from app.services.kit.compiled import SuiteCache, suite_of

    headers = await project.admin()
    await define_suite(client, headers, suite="one")
    cache = SuiteCache()
    columns = [c.key for c in inspect(SuiteVersion).column_attrs]
    queries: list[list[str]] = []
    for _ in range(2):
        async with db() as session:
            suite = await definition_repo.get_suite(session, project.id, "one")
            assert suite is not None and suite.active_version_id is not None
            sent: list[str] = []
            driver = await driver_of(session)
            driver.add_query_logger(lambda record, sent=sent: sent.append(record.query))
            stored, compiled = await suite_of(session, cache, suite.active_version_id)
            queries.append(sent)
            read = {key: getattr(stored, key) for key in columns}
            if len(queries) == 1:
                first, first_read = compiled, read
    assert [len([q for q in sent if "suite_versions" in q]) for sent in queries] == [1, 0]
    assert compiled is first and read == first_read
    assert inspect(stored).transient
