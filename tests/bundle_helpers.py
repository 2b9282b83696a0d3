"""A report worth bundling: three checks, a slice, a paired comparison against a baseline,
an output stored in object storage, trace refs, and bodies removed by retention."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import orjson
from sqlalchemy import text

from app.services import retention
from tests.factories import case, define_suite, start_evaluation, suite_body

REPO = Path(__file__).resolve().parent.parent
NODE_VERIFIER = REPO / "verify-bundle.mjs"
# Node as the verifier's shebang runs it: with optimising compiles on the main thread, so that
# Node's exit cannot deadlock (nodejs/node#54918; verify-bundle.mjs says more). Scripts that
# import the verifier get no re-run of their own, so they need the flag given here.
NODE = ("node", "--no-concurrent-recompilation")
# A Node run still going after this long is a hang: the test fails instead of waiting for good.
NODE_TIMEOUT = 300
BIG_OUTPUT = {"text": "x" * 300_000}


def comparative_suite() -> dict[str, Any]:
    """The factory suite under non-inferiority with Holm's correction."""
    body = suite_body(rule="non_inferiority", correction="holm")
    body["decision_rule"]["margin"] = 0.2
    return body


def _cases(shift: float, big: bool) -> list[dict[str, Any]]:
    cases = []
    for i in range(12):
        extra: dict[str, Any] = {"output": {"answer": f"a{i}", "shift": shift}}
        if big and i == 3:
            extra["output"] = BIG_OUTPUT
        if i % 4 == 1:
            extra["trace_ref"] = {"id": f"trace-{i}", "digest": "sha256:" + f"{i:02d}" * 32}
        if i == 2:
            extra["evidence_refs"] = ["sha256:" + "ab" * 32]
        cases.append(case("accuracy", f"e{i:02d}", status="pass" if i % 6 else "fail", **extra))
    cases += [case("no_harm", f"e{i:02d}", output={"v": "ok"}) for i in range(12)]
    cases += [
        case(
            "helpfulness",
            f"e{i:02d}",
            r,
            score=min(1.0, 0.55 + shift + i / 40),
            output={"judgement": f"j{i}.{r}"},
        )
        for i in range(12)
        for r in range(2)
    ]
    return cases


async def issue(
    client: httpx.AsyncClient, headers: dict[str, str], cases: list[dict[str, Any]], **start: Any
) -> dict[str, Any]:
    evaluation = await start_evaluation(client, headers, **start)
    url = f"/api/v1/evaluations/{evaluation['evaluation_id']}"
    response = await client.post(url + "/cases", json={"cases": cases}, headers=headers)
    assert response.status_code == 200, response.text
    response = await client.post(url + "/finish", headers=headers)
    assert response.status_code == 201, response.text
    report: dict[str, Any] = response.json()
    return report


async def rich_report(
    client: httpx.AsyncClient, headers: dict[str, str], db: Any, store: Any
) -> dict[str, Any]:
    """Issue the report; then age four example bodies and one output past retention."""
    await define_suite(client, headers, body=comparative_suite())
    baseline = await issue(client, headers, _cases(0.0, big=False), mode="experiment")
    report = await issue(
        client,
        headers,
        _cases(0.05, big=True),
        baseline_evaluation_id=baseline["body"]["evaluation_id"],
    )
    async with db() as session, session.begin():
        # Aged by hand: created_at is frozen once written (triggers), so with triggers off.
        await session.execute(text("SET LOCAL session_replication_role = replica"))
        dataset_id = (
            await session.execute(
                text("SELECT id FROM dataset_versions WHERE id = :id"),
                {"id": report["body"]["dataset_refs"][0]["id"]},
            )
        ).scalar_one()
        await session.execute(
            text(
                "UPDATE examples SET created_at = now() - interval '60 days'"
                " WHERE dataset_version_id = :id AND example_id IN ('e00', 'e01', 'e02', 'e03')"
            ),
            {"id": dataset_id},
        )
        await session.execute(
            text(
                "UPDATE cases SET created_at = now() - interval '60 days'"
                " WHERE evaluation_id = :id AND check_id = 'no_harm' AND example_id = 'e05'"
            ),
            {"id": report["body"]["evaluation_id"]},
        )
    await retention.apply(db, store, timedelta(days=30))
    return report


async def export(
    client: httpx.AsyncClient, headers: dict[str, str], report_id: str
) -> dict[str, Any]:
    """Export a bundle; its record."""
    response = await client.post(
        "/evaluations/api/reports/bundle", json={"report_id": report_id}, headers=headers
    )
    assert response.status_code == 201, response.text
    record: dict[str, Any] = response.json()
    return record


async def download(
    client: httpx.AsyncClient, headers: dict[str, str], bundle_id: str, to: Path
) -> Path:
    """Download a bundle's bytes to a file."""
    response = await client.get(
        f"/evaluations/api/reports/bundles/{bundle_id}/content", headers=headers
    )
    assert response.status_code == 200, response.text
    to.write_bytes(response.content)  # noqa: ASYNC240 (a small test file)
    return to


def lines_of(path: Path) -> list[dict[str, Any]]:
    """A bundle's lines, parsed."""
    return [orjson.loads(line) for line in gzip.decompress(path.read_bytes()).splitlines()]


def python_verify(path: Path, *extra: str) -> tuple[int, dict[str, Any]]:
    """Run `evalbook verify-bundle --json` in its own process."""
    done = subprocess.run(
        [sys.executable, "-m", "app.cli.main", "verify-bundle", str(path), "--json", *extra],
        capture_output=True,
        cwd=REPO,
        check=False,
    )
    report = orjson.loads(done.stdout) if done.stdout.strip() else {"stderr": done.stderr.decode()}
    return done.returncode, report


def node_verify(path: Path, *extra: str) -> tuple[int, dict[str, Any]]:
    """Run `node verify-bundle.mjs --json`."""
    done = subprocess.run(
        [*NODE, str(NODE_VERIFIER), str(path), "--json", *extra],
        capture_output=True,
        cwd=REPO,
        check=False,
        timeout=NODE_TIMEOUT,
    )
    report = orjson.loads(done.stdout) if done.stdout.strip() else {"stderr": done.stderr.decode()}
    return done.returncode, report


def node_map(export: str, inputs: list[Any], *, spread: bool = False) -> list[Any]:
    """Apply one of the Node verifier's exported functions to each input, in one process (each
    input a list of its arguments with `spread`)."""
    call = f"{export}(...v)" if spread else f"{export}(v)"
    script = (
        f"import {{ {export} }} from " + orjson.dumps(NODE_VERIFIER.as_uri()).decode() + ";"
        "let input = '';"
        "process.stdin.on('data', (d) => (input += d));"
        "process.stdin.on('end', () => {"
        f"  process.stdout.write(JSON.stringify(JSON.parse(input).map((v) => {call})));"
        "});"
    )
    # The json module, not orjson: inputs and answers may hold lone surrogates and big integers.
    done = subprocess.run(
        [*NODE, "--input-type=module", "-e", script],
        input=json.dumps(inputs),
        capture_output=True,
        text=True,
        check=True,
        timeout=NODE_TIMEOUT,
    )
    results: list[Any] = json.loads(done.stdout)
    return results


def node_verify_many(
    paths: list[Path],
    trusted_key: str | None = None,
    read_block: int | None = None,
    verifier: Path = NODE_VERIFIER,
) -> list[dict[str, Any]]:
    """Verify many files in one Node process through the verifier's exported `verifyFile`
    (with `trusted_key` trusted and required, the file read `read_block` bytes at a time when
    given; another copy of the verifier when named): [{"exit", "document"?}, ...] in order.
    An exception that escapes `verifyFile` is kept as {"exit": "threw", "error": its stack}, so
    the caller can name the file that caused it."""
    script = (
        "import { trustedKeysOf, verifyFile } from "
        + orjson.dumps(verifier.as_uri()).decode()
        + ";"
        "let input = '';"
        "process.stdin.on('data', (d) => (input += d));"
        "process.stdin.on('end', async () => {"
        "  const { paths, key, block } = JSON.parse(input);"
        "  const options = key === null ? {} : { trustedKeys: trustedKeysOf([key]), requireTrust: true };"
        "  if (block !== null) options.readBlock = block;"
        "  const out = [];"
        "  for (const path of paths) {"
        "    try { out.push(await verifyFile(path, options)); }"
        "    catch (e) { out.push({ exit: 'threw', error: String(e && e.stack || e) }); }"
        "  }"
        "  process.stdout.write(JSON.stringify(out));"
        "});"
    )
    done = subprocess.run(
        [*NODE, "--input-type=module", "-e", script],
        input=orjson.dumps(
            {"paths": [str(p) for p in paths], "key": trusted_key, "block": read_block}
        ),
        capture_output=True,
        timeout=NODE_TIMEOUT,
    )
    # Node itself died (not an exception in verifyFile, kept above): its stderr says why.
    assert done.returncode == 0, (done.returncode, done.stderr.decode(errors="replace")[-4000:])
    results: list[dict[str, Any]] = orjson.loads(done.stdout)
    return results
