"""schemathesis (an implementation we did not write) against the served app and its own
OpenAPI document, every check on: no server error, no answer outside the document, no
schema-valid request refused, no schema-invalid one accepted. Bounded to about a minute."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import httpx

from app.api.main import create_app
from app.platform.config import Settings
from tests.conftest import REPO, Project
from tests.factories import case, send_and_finish
from tests.schemathesis_hooks import KNOWN_DATASET, KNOWN_EXAMPLES, KNOWN_SCORER, KNOWN_SUITE
from tests.served import uvicorn_serving

MAX_EXAMPLES = int(os.environ.get("EVALBOOK_SCHEMATHESIS_EXAMPLES", "25"))
SEED = os.environ.get("EVALBOOK_SCHEMATHESIS_SEED", "20261130")


async def _define_known(http: httpx.AsyncClient, headers: dict[str, str]) -> None:
    """The definitions the OpenAPI examples (and the hooks) name."""
    scorer = f"/api/v1/scorers/{KNOWN_SCORER['name']}/versions/{KNOWN_SCORER['version']}"
    answer = await http.put(scorer, json={"definition": {"kind": "exact"}}, headers=headers)
    assert answer.status_code == 201, answer.text
    examples = [
        {"id": f"e{i:02d}", "body": {"q": i}, "tags": ["lang:de", "lang:en"] if i == 0 else []}
        for i in range(KNOWN_EXAMPLES)
    ]
    dataset = f"/api/v1/datasets/{KNOWN_DATASET['name']}/versions/{KNOWN_DATASET['version']}"
    answer = await http.put(dataset, json={"examples": examples}, headers=headers)
    assert answer.status_code == 201, answer.text
    suite = f"/api/v1/suites/{KNOWN_SUITE['name']}/versions/{KNOWN_SUITE['version']}"
    check = {
        "check_id": "accuracy",
        "scorer": KNOWN_SCORER,
        "dataset": KNOWN_DATASET,
        "aggregation": {"method": "pass_rate", "threshold": 0.9},
    }
    answer = await http.put(suite, json={"validity_hours": 24, "checks": [check]}, headers=headers)
    assert answer.status_code == 201, answer.text
    # Two subjects' current gate reports, for the boards of that suite version.
    for digit, fails in (("a", 0), ("b", 2)):
        start = {
            "subject": {"digest": "sha1:" + digit * 40},
            "suite": dict(KNOWN_SUITE),
            "mode": "gate",
            "execution_mode": "platform",
        }
        started = await http.post("/api/v1/evaluations", json=start, headers=headers)
        assert started.status_code == 201, started.text
        cases = [
            case("accuracy", f"e{i:02d}", status="fail" if i < fails else "pass")
            for i in range(KNOWN_EXAMPLES)
        ]
        await send_and_finish(http, headers, started.json()["evaluation_id"], cases)


async def test_schemathesis_finds_nothing(
    settings: Settings, project: Project, tmp_path: Path
) -> None:
    admin = await project.token("admin", kind="runner", assurance="reported")
    peer = await project.token(kind="peer")
    # The OpenAPI example's callback host resolves (through the static table, never DNS) to a
    # receiver-less loopback address the served app may link to (it delivers nothing).
    served = settings.model_copy(
        update={
            "callback_private_hosts": [*settings.callback_private_hosts, "codebook.example"],
            "callback_static_hosts": {
                **(settings.callback_static_hosts or {}),
                "codebook.example": ["127.0.0.1"],
            },
        }
    )
    async with uvicorn_serving(create_app(served)) as port:
        base = f"http://127.0.0.1:{port}"
        async with httpx.AsyncClient(base_url=base) as http:
            await _define_known(http, {"Authorization": f"Bearer {admin}"})
        config = tmp_path / "schemathesis.toml"
        config.write_text(
            f'headers = {{ Authorization = "Bearer {admin}" }}\n'
            "[[operations]]\n"
            'include-path = "/project/api/peer/report"\n'
            f'headers = {{ Authorization = "Bearer {peer}" }}\n'
            # DELETE of a scorer version retires it: the contract keeps it readable (marked
            # retired) for the reports that pinned it; tests/schemathesis_hooks.py wraps the
            # use-after-free check to say so (an operation's check settings do not reach every
            # phase).
        )
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "schemathesis.cli",
            "--config-file",
            str(config),
            "run",
            f"{base}/openapi.json",
            "--checks",
            "all",
            "--max-examples",
            str(MAX_EXAMPLES),
            "--seed",
            SEED,
            # U+0000 in text has tests of its own (tests/routers/test_edge.py); generated keys of
            # free-form JSON objects are not constrained by the document's key pattern.
            "--generation-allow-x00",
            "false",
            "--no-color",
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            cwd=REPO,
            env={
                **os.environ,
                "PYTHONPATH": str(REPO),
                "SCHEMATHESIS_HOOKS": "tests.schemathesis_hooks",
            },
        )
        output, _ = await asyncio.wait_for(process.communicate(), 300)
    report = output.decode(errors="replace")
    failures = report.split("FAILURES", 1)[-1].split("WARNINGS", 1)[0]
    assert process.returncode == 0, failures[:20000]
    assert "No issues found" in report or " passed" in report, report[-3000:]
