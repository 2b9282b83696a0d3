"""Bundle uploads against real stores: an S3 outage mid-upload, cancellation, the sweep, the
local directory store; and the retention policy."""

from __future__ import annotations

import asyncio
import base64
import os
import re
import subprocess
import sys
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import orjson
from fastapi import FastAPI
from sqlalchemy import text

from app.api.main import create_app
from app.platform.config import Settings
from app.platform.storage.local import LocalObjectStore
from tests.bundle_helpers import REPO, rich_report
from tests.conftest import MotoServer, Project, free_port
from tests.factories import problem
from tests.proxy import StoreOutageProxy

PART = 5 * 1024 * 1024


async def big_report(client: httpx.AsyncClient, headers: dict[str, str]) -> str:
    """A report whose bundle is about 14 MB of incompressible outputs (three parts)."""
    put = client.put
    response = await put(
        "/api/v1/scorers/judge/versions/1", json={"definition": {"k": 1}}, headers=headers
    )
    assert response.status_code == 201, response.text
    examples = [{"id": f"x{i:03d}", "body": {"i": i}, "tags": []} for i in range(70)]
    response = await put(
        "/api/v1/datasets/big/versions/1", json={"examples": examples}, headers=headers
    )
    assert response.status_code == 201, response.text
    suite = {
        "validity_hours": 24,
        "decision_rule": {"rule": "threshold", "alpha": 0.05, "margin": 0, "correction": "none"},
        "checks": [
            {
                "check_id": "ok",
                "scorer": {"name": "judge", "version": "1"},
                "dataset": {"name": "big", "version": "1"},
                "aggregation": {"method": "pass_rate", "threshold": 0.5},
            }
        ],
    }
    response = await put("/api/v1/suites/big/versions/1", json=suite, headers=headers)
    assert response.status_code == 201, response.text
    start = {
        "subject": {"digest": "sha1:" + "1" * 40},
        "suite": {"name": "big"},
        "mode": "experiment",
        "execution_mode": "platform",
    }
    response = await client.post("/api/v1/evaluations", json=start, headers=headers)
    evaluation_id = response.json()["evaluation_id"]
    lines = b"".join(
        orjson.dumps(
            {
                "check_id": "ok",
                "example_id": f"x{i:03d}",
                "repeat": 0,
                "status": "pass",
                "output": base64.b64encode(os.urandom(150_000)).decode(),
            }
        )
        + b"\n"
        for i in range(70)
    )
    response = await client.post(
        f"/api/v1/evaluations/{evaluation_id}/cases",
        content=lines,
        headers={**headers, "Content-Type": "application/x-ndjson"},
    )
    assert response.status_code == 200, response.text
    response = await client.post(f"/api/v1/evaluations/{evaluation_id}/finish", headers=headers)
    assert response.status_code == 201, response.text
    report_id: str = response.json()["report_id"]
    return report_id


async def uploads_and_objects(app: FastAPI, prefix: str) -> tuple[list[Any], list[Any]]:
    """Multipart uploads in progress and objects under `prefix`, asked of moto directly."""
    store = app.state.resources.object_store
    uploads = await store.client.list_multipart_uploads(Bucket=store.bucket, Prefix=prefix)
    objects = await store.client.list_objects_v2(Bucket=store.bucket, Prefix=prefix)
    return uploads.get("Uploads", []), objects.get("Contents", [])


async def test_an_s3_outage_mid_upload_leaves_nothing(
    project: Project,
    app: FastAPI,
    db: Any,
    settings: Settings,
    moto_server: MotoServer,
) -> None:
    """The endpoint the service talks to goes away after the first part: the API answers 503,
    no record is listed, and once the store is back the upload is aborted (no object, no
    upload in progress)."""
    proxy = StoreOutageProxy(moto_server.port)
    await proxy.start()
    outage_settings = settings.model_copy(
        update={
            "s3_endpoint_url": proxy.url,
            "bundle_part_bytes": PART,
            "bundle_abort_backoff_cap_seconds": 0.2,
            "bundle_abort_horizon_seconds": 60.0,
        }
    )
    outage_app = create_app(outage_settings)
    async with outage_app.router.lifespan_context(outage_app):
        transport = httpx.ASGITransport(app=outage_app)
        async with httpx.AsyncClient(transport=transport, base_url="http://outage") as client:
            headers = await project.admin()
            report_id = await big_report(client, headers)
            prefix = f"bundles/{project.path}/{report_id}/"
            proxy.sent = 0
            proxy.cut_after_bytes = PART + PART // 2
            response = await client.post(
                "/evaluations/api/reports/bundle", json={"report_id": report_id}, headers=headers
            )
            assert "object store" in problem(response, 503)["detail"]
            uploads, objects = await uploads_and_objects(app, prefix)
            assert len(uploads) == 1 and objects == []  # the store is down: abort pending
            await proxy.restore()
            await asyncio.wait_for(outage_app.state.resources.upload_janitor.wait_idle(), 30)
            assert await uploads_and_objects(app, prefix) == ([], [])
            async with db() as session:
                count = await session.execute(
                    text("SELECT count(*) FROM bundles WHERE report_id = :id"), {"id": report_id}
                )
                assert count.scalar_one() == 0
            # Back up, the same export succeeds.
            response = await client.post(
                "/evaluations/api/reports/bundle", json={"report_id": report_id}, headers=headers
            )
            assert response.status_code == 201, response.text
            assert response.json()["size_bytes"] > 2 * PART
    await proxy.stop()


async def test_stopping_the_moto_server_mid_upload_answers_503_and_records_nothing(
    project: Project, db: Any, settings: Settings
) -> None:
    """The S3 server process itself is stopped after the first part: 503, no record; the
    server, started again, holds neither an object nor an upload."""
    moto = MotoServer(free_port())
    moto.start()
    proxy = StoreOutageProxy(moto.port)
    await proxy.start()
    own_settings = settings.model_copy(
        update={
            "s3_endpoint_url": proxy.url,
            "bundle_part_bytes": PART,
            "bundle_abort_horizon_seconds": 1.0,
        }
    )
    own_app = create_app(own_settings)
    try:
        async with own_app.router.lifespan_context(own_app):
            transport = httpx.ASGITransport(app=own_app)
            async with httpx.AsyncClient(transport=transport, base_url="http://stop") as client:
                headers = await project.admin()
                report_id = await big_report(client, headers)
                proxy.sent = 0
                proxy.cut_after_bytes = PART + PART // 2
                proxy.on_cut = moto.stop
                response = await client.post(
                    "/evaluations/api/reports/bundle",
                    json={"report_id": report_id},
                    headers=headers,
                )
                assert "object store" in problem(response, 503)["detail"]
                async with db() as session:
                    count = await session.execute(
                        text("SELECT count(*) FROM bundles WHERE report_id = :id"),
                        {"id": report_id},
                    )
                    assert count.scalar_one() == 0
                moto.start()
                store = own_app.state.resources.object_store
                await store.ensure_bucket()
                prefix = f"bundles/{project.path}/{report_id}/"
                uploads = await store.client.list_multipart_uploads(
                    Bucket=store.bucket, Prefix=prefix
                )
                objects = await store.client.list_objects_v2(Bucket=store.bucket, Prefix=prefix)
                assert uploads.get("Uploads", []) == [] and objects.get("Contents", []) == []
                await asyncio.wait_for(own_app.state.resources.upload_janitor.wait_idle(), 30)
    finally:
        await proxy.stop()
        moto.stop()


async def test_a_cancelled_export_aborts_its_upload(
    project: Project, app: FastAPI, settings: Settings, moto_server: MotoServer
) -> None:
    proxy = StoreOutageProxy(moto_server.port)
    await proxy.start()
    cancel_settings = settings.model_copy(
        update={"s3_endpoint_url": proxy.url, "bundle_part_bytes": PART}
    )
    cancel_app = create_app(cancel_settings)
    async with cancel_app.router.lifespan_context(cancel_app):
        transport = httpx.ASGITransport(app=cancel_app)
        async with httpx.AsyncClient(transport=transport, base_url="http://cancel") as client:
            headers = await project.admin()
            report_id = await big_report(client, headers)
            prefix = f"bundles/{project.path}/{report_id}/"
            proxy.sent = 0
            task = asyncio.create_task(
                client.post(
                    "/evaluations/api/reports/bundle",
                    json={"report_id": report_id},
                    headers=headers,
                )
            )
            while proxy.sent < PART and not task.done():  # noqa: ASYNC110 (polls a counter)
                await asyncio.sleep(0.005)
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            await asyncio.wait_for(cancel_app.state.resources.upload_janitor.wait_idle(), 30)
            assert await uploads_and_objects(app, prefix) == ([], [])
    await proxy.stop()


async def test_the_sweep_aborts_abandoned_uploads(app: FastAPI) -> None:
    store = app.state.resources.object_store
    key = f"bundles/sweep/{uuid.uuid4()}.jsonl.gz"
    upload = await store.begin_upload(key, "application/octet-stream")
    await upload.write_part(b"x" * 100)
    # moto reports every upload as initiated in 2010, so only the local store's test below
    # can show that young uploads are spared.
    assert await store.sweep_uploads("bundles/sweep/", timedelta(seconds=0)) >= 1
    assert await uploads_and_objects(app, key) == ([], [])


async def test_the_local_store_writes_parts_atomically(tmp_path: Path) -> None:
    store = LocalObjectStore(tmp_path)
    upload = await store.begin_upload("bundles/a/b.gz", "application/gzip")
    await upload.write_part(b"one,")
    await upload.write_part(b"two")
    assert not await store.exists("bundles/a/b.gz")
    await upload.complete()
    assert await store.get("bundles/a/b.gz") == b"one,two"
    assert await store.size("bundles/a/b.gz") == 7
    assert b"".join([c async for c in store.stream("bundles/a/b.gz", 3)]) == b"one,two"
    failed = await store.begin_upload("bundles/a/c.gz", "application/gzip")
    await failed.write_part(b"partial")
    await failed.abort()
    await failed.abort()
    assert not await store.exists("bundles/a/c.gz")
    assert list((tmp_path / ".uploads").iterdir()) == []
    leftover = await store.begin_upload("bundles/a/d.gz", "application/gzip")
    await leftover.write_part(b"crash")
    assert await store.sweep_uploads("bundles/", timedelta(hours=1)) == 0
    assert await store.sweep_uploads("bundles/", timedelta(seconds=-1)) == 1


async def test_retention_keeps_digests_and_reports_still_verify(
    project: Project, client: httpx.AsyncClient, app: FastAPI, db: Any
) -> None:
    headers = await project.admin()
    report = await rich_report(client, headers, db, app.state.resources.object_store)
    verified = await client.post(
        "/evaluations/api/reports/verify", json={"report_id": report["report_id"]}, headers=headers
    )
    assert verified.json()["verified"] is True
    dataset = (await client.get("/api/v1/datasets/qa/versions/1", headers=headers)).json()
    by_id = {e["id"]: e for e in dataset["examples"]}
    assert by_id["e00"].get("body") is None and by_id["e00"]["body_digest"].startswith("sha256:")
    assert by_id["e04"]["body"] == {"q": "question 4"}
    assert dataset["digest"] == report["body"]["dataset_refs"][0]["digest"]
    async with db() as session:
        row = (
            await session.execute(
                text(
                    "SELECT coalesce(c.output, o.output), c.output_digest, c.output_removed_at"
                    " FROM cases c"
                    " LEFT JOIN case_outputs o USING (evaluation_id, check_id, example_id, repeat)"
                    " WHERE c.evaluation_id = :id AND c.check_id = 'no_harm'"
                    " AND c.example_id = 'e05'"
                ),
                {"id": report["body"]["evaluation_id"]},
            )
        ).one()
    assert row[0] is None and row[1].startswith("sha256:") and row[2] is not None


async def _aged_output(project: Project, client: httpx.AsyncClient, app: FastAPI, db: Any) -> str:
    """A report whose large output (in the object store) is made 90 days old; its key."""
    store = app.state.resources.object_store
    report = await rich_report(client, await project.admin(), db, store)
    async with db() as session, session.begin():
        # Aged by hand: created_at is frozen once written (triggers), so with triggers off.
        await session.execute(text("SET LOCAL session_replication_role = replica"))
        key = (
            await session.execute(
                text(
                    "UPDATE cases SET created_at = now() - interval '90 days'"
                    " WHERE evaluation_id = :id AND output_key IS NOT NULL RETURNING output_key"
                ),
                {"id": report["body"]["evaluation_id"]},
            )
        ).scalar_one()
    return str(key)


async def test_retention_deletes_large_outputs_no_kept_case_names(
    project: Project, client: httpx.AsyncClient, app: FastAPI, db: Any
) -> None:
    from app.services import retention

    key = await _aged_output(project, client, app, db)
    assert await app.state.resources.object_store.exists(key)
    result = await retention.apply(db, app.state.resources.object_store, timedelta(days=30))
    assert result.outputs >= 1 and result.objects >= 1
    assert not await app.state.resources.object_store.exists(key)


async def test_the_retention_command_counts_first_and_removes_only_when_told(
    settings: Settings,
    database_url: str,
    project: Project,
    client: httpx.AsyncClient,
    app: FastAPI,
    db: Any,
) -> None:
    store = app.state.resources.object_store
    key = await _aged_output(project, client, app, db)
    env = {
        **os.environ,
        # The service's own role, which may not migrate; migrations run as the owner.
        "EVALBOOK_DATABASE_URL": settings.database_url or "",
        "EVALBOOK_MIGRATION_DATABASE_URL": database_url,
        "EVALBOOK_S3_ENDPOINT_URL": settings.s3_endpoint_url or "",
        "EVALBOOK_S3_BUCKET": settings.s3_bucket or "",
        "EVALBOOK_S3_ACCESS_KEY_ID": "test",
        "EVALBOOK_S3_SECRET_ACCESS_KEY": "test",
    }

    def retention(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "app.cli.main", "retention", "apply", *args],
            capture_output=True,
            text=True,
            cwd=REPO,
            env=env,
            check=False,
            stdin=subprocess.DEVNULL,  # no terminal: nobody to say yes
        )

    preview = await asyncio.to_thread(retention, "--older-than", "30", "--dry-run")
    assert preview.returncode == 0, preview.stderr
    counted = re.search(
        r"would remove \d+ example bodies .* (\d+) case outputs .* (\d+) stored", preview.stdout
    )
    assert counted and int(counted[1]) >= 1 and int(counted[2]) >= 1, preview.stdout
    unconfirmed = await asyncio.to_thread(retention, "--older-than", "30")
    assert unconfirmed.returncode == 2 and "pass --yes" in unconfirmed.stderr
    assert await store.exists(key), "neither a dry run nor an unconfirmed run removes anything"
    done = await asyncio.to_thread(retention, "--older-than", "30", "--yes")
    assert done.returncode == 0, done.stderr
    assert re.search(r"removed \d+ example bodies, [1-9]\d* case outputs", done.stdout)
    assert not await store.exists(key)
    refused = await asyncio.to_thread(retention, "--older-than", "-1", "--yes")
    assert refused.returncode == 2
