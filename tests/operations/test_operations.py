"""Health, readiness, metrics, the OpenAPI document, and the object stores."""

from __future__ import annotations

import httpx
import pytest

from app.api.main import create_app
from app.platform.config import Settings
from app.platform.storage import ObjectNotFound, ObjectStoreUnavailable
from app.platform.storage.local import LocalObjectStore
from tests.conftest import MotoServer, Project, free_port
from tests.factories import case, define_suite, problem, start_evaluation


async def test_health_ready_metrics(client: httpx.AsyncClient) -> None:
    assert (await client.get("/healthz")).json() == {"status": "ok"}
    assert (await client.get("/readyz")).json()["database"] == "ok"
    metrics = await client.get("/metrics")
    assert metrics.headers["content-type"].startswith("text/plain")
    assert (
        'evalbook_http_requests_total{method="GET",route="/healthz",status="200"}' in metrics.text
    )


async def test_openapi_is_complete(client: httpx.AsyncClient) -> None:
    document = (await client.get("/openapi.json")).json()
    paths = document["paths"]
    for path in (
        "/api/v1/scorers/{name}/versions/{version}",
        "/api/v1/datasets/{name}/versions/{version}",
        "/api/v1/suites/{name}/versions/{version}",
        "/api/v1/suites/{name}/versions/{version}/activate",
        "/api/v1/suites/{name}",
        "/api/v1/evaluations",
        "/api/v1/evaluations/{evaluation_id}",
        "/api/v1/evaluations/{evaluation_id}/cases",
        "/healthz",
        "/readyz",
        "/metrics",
    ):
        assert path in paths, path
    schemas = document["components"]["schemas"]
    for operation in (
        paths["/api/v1/evaluations/{evaluation_id}/cases"]["post"],
        paths["/api/v1/suites/{name}/versions/{version}"]["put"],
        paths["/api/v1/evaluations"]["post"],
    ):
        content = operation["requestBody"]["content"]
        assert "example" in content["application/json"]
        name = content["application/json"]["schema"]["$ref"].rsplit("/", 1)[-1]
        assert name in schemas
        assert operation["responses"]["422"]["content"]["application/problem+json"]
    assert (
        "application/x-ndjson"
        in paths["/api/v1/evaluations/{evaluation_id}/cases"]["post"]["requestBody"]["content"]
    )


async def test_s3_store_against_moto(app) -> None:
    store = app.state.resources.object_store
    await store.put("t/a.json", b"{}", "application/json")
    assert await store.exists("t/a.json")
    assert await store.get("t/a.json") == b"{}"
    await store.delete("t/a.json")
    assert not await store.exists("t/a.json")
    with pytest.raises(ObjectNotFound):
        await store.get("t/a.json")


async def test_local_store(tmp_path) -> None:
    store = LocalObjectStore(tmp_path / "objects")
    await store.ping()
    await store.put("x/y.json", b"1", "application/json")
    assert await store.get("x/y.json") == b"1" and await store.exists("x/y.json")
    await store.delete("x/y.json")
    with pytest.raises(ObjectNotFound):
        await store.get("x/y.json")
    with pytest.raises(ValueError):
        await store.put("../escape", b"", "text/plain")


async def test_object_store_outage_refuses_cleanly(settings: Settings, db) -> None:
    moto = MotoServer(free_port())
    moto.start()
    app = create_app(
        settings.model_copy(update={"s3_endpoint_url": moto.url, "s3_bucket": "outage"})
    )
    try:
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
                from tests.conftest import new_project

                project: Project = await new_project(db, client)
                headers = await project.admin()
                await define_suite(client, headers)
                evaluation = await start_evaluation(client, headers)
                moto.stop()
                with pytest.raises(ObjectStoreUnavailable):
                    await app.state.resources.object_store.ping()
                problem(await client.get("/readyz"), 503)
                big = {"cases": [case("accuracy", "e00", output={"t": "x" * 300_000})]}
                response = await client.post(
                    f"/api/v1/evaluations/{evaluation['evaluation_id']}/cases",
                    json=big,
                    headers=headers,
                )
                problem(response, 503)
                status = await client.get(
                    f"/api/v1/evaluations/{evaluation['evaluation_id']}", headers=headers
                )
                assert status.json()["received_cases"] == 0
    finally:
        moto.stop()
