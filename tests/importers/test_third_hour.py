"""A newcomer's third hour with the importers, through the real command line and the tools' own
artefacts (an Inspect log Inspect wrote here, lm-eval and promptfoo output in tests/data): a
comparison imported for a gate is what the gate reads; a baseline run needs no hidden flag; the
suite and mode the import chose are printed; a refusal names what differs; subject names are
kept and found; every command exits by one table (app.domain.exits)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import httpx

from app.api.main import create_app
from app.platform.config import Settings
from tests.conftest import REPO, Project
from tests.factories import evalbook_cli
from tests.importers.test_importers import (
    LM_EVAL,
    PROMPTFOO,
    WRITER,
    _import,
    _report_id,
    inspect_logs,  # noqa: F401  (the session fixture, used by name)
)
from tests.served import uvicorn_serving

RULE = ["--threshold", "0.5", "--rule", "non_inferiority", "--margin", "0.1"]


async def _cli(port: int | None, token: str | None, cwd: Path, *args: str) -> tuple[int, str]:
    """`evalbook ARGS` in `cwd` (stdout and stderr together), with only the given token."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVALBOOK_")}
    env["PYTHONPATH"] = str(REPO)
    if port is not None:
        env["EVALBOOK_URL"] = f"http://127.0.0.1:{port}"
    if token is not None:
        env["EVALBOOK_TOKEN"] = token
    return await evalbook_cli(*args, env=env, cwd=cwd, seconds=300)


async def test_a_comparison_imported_for_a_gate_is_what_the_gate_reads(
    project: Project,
    client: httpx.AsyncClient,
    settings: Settings,
    inspect_logs: dict[str, Path],  # noqa: F811
    tmp_path: Path,
) -> None:
    token = await project.token(*WRITER)
    admin = await project.admin()
    baseline_subject, candidate = "sha1:" + "a1" * 20, "sha1:" + "b2" * 20
    async with uvicorn_serving(create_app(settings)) as port:
        # The baseline run: a comparing rule and no --baseline; no --mode needed.
        code, out = await _import(
            port,
            token,
            "inspect",
            str(inspect_logs["eval"]),
            "--subject",
            f"digest={baseline_subject}",
            "--suite",
            "newcomer echo sums",
            *RULE,
        )
        assert code == 0, out
        assert "suite newcomer-echo-sums (from --suite 'newcomer echo sums'), version c" in out
        assert "mode experiment: a baseline run" in out, out
        baseline = re.search(r"^evaluation (\S+)", out, re.MULTILINE)
        assert baseline
        assert f"--baseline {baseline[1]}" in out  # the next step, written out
        baseline_report = _report_id(out)
        page = await client.get(f"/evaluations/api/reports/{baseline_report}", headers=admin)
        assert page.json()["body"]["mode"] == "experiment"

        # The candidate, compared with it: a gate report, and the gate reads it.
        code, out = await _import(
            port,
            token,
            "inspect",
            str(inspect_logs["json"]),
            "--subject",
            f"digest={candidate}",
            "--suite",
            "newcomer echo sums",
            "--baseline",
            baseline[1],
            *RULE,
        )
        assert code == 0, out
        assert "mode gate: a comparison with --baseline" in out, out
        step = re.search(r"^gate on it: (evalbook gate .*)$", out, re.MULTILINE)
        assert step, out
        args = step[1].split()[1:]
        assert args == ["gate", "--subject", candidate, "--suite", "newcomer-echo-sums"]
        code, gate_out = await _cli(port, token, tmp_path, *args)
        assert code in (0, 1, 2) and "missing" not in gate_out, gate_out
        # The name as typed is a usage error that names the name the import used.
        code, gate_out = await _cli(
            port, token, tmp_path, "gate", "--subject", candidate, "--suite", "newcomer echo sums"
        )
        assert code == 64 and "did you mean 'newcomer-echo-sums'" in gate_out, gate_out


async def test_names_people_recognise(
    project: Project,
    client: httpx.AsyncClient,
    settings: Settings,
    inspect_logs: dict[str, Path],  # noqa: F811
) -> None:
    token = await project.token(*WRITER)
    admin = await project.admin()
    log = str(inspect_logs["eval"])
    async with uvicorn_serving(create_app(settings)) as port:
        # A name given with --subject is kept with the evaluation and found on the list.
        code, out = await _import(
            port,
            token,
            "inspect",
            log,
            "--subject",
            "digest=sha1:" + "c3" * 20 + ",model=mock-v2",
            "--suite",
            "named",
            "--threshold",
            "0.5",
        )
        assert code == 0, out
        named = _report_id(out)
        # Without a name, the model Inspect ran names the subject.
        code, out = await _import(
            port, token, "inspect", log, "--subject", "digest=sha1:" + "d4" * 20, "--suite",
            "named", "--threshold", "0.5",
        )  # fmt: skip
        assert code == 0, out
        unnamed = _report_id(out)
        # Another threshold into the same suite: refused, naming the field that differs.
        code, out = await _import(
            port, token, "inspect", log, "--subject", "digest=sha1:" + "e5" * 20, "--suite",
            "named", "--threshold", "0.35",
        )  # fmt: skip
        assert code == 2, out
        assert "checks[match].aggregation.threshold: 0.5 → 0.35" in out, out
        # Two lm-eval task sets are two suites, each named by its tasks.
        files = sorted(LM_EVAL.glob("samples_*.jsonl"))
        for chosen, suite in (
            ([str(LM_EVAL)], "tiny_gen.tiny_mc"),  # the output directory itself
            ([str(files[0])], "tiny_gen"),
        ):
            code, out = await _import(
                port, token, "lm-eval", *chosen, "--subject", "digest=sha1:" + "f6" * 20,
                "--threshold", "0.3",
            )  # fmt: skip
            assert code == 0, out
            assert f"suite {suite}, version" in out, out
    found = await client.get(
        "/evaluations/api/reports", params={"subject": "MOCK-V2"}, headers=admin
    )
    assert [r["report_id"] for r in found.json()["reports"]] == [named]
    body = (await client.get(f"/evaluations/api/reports/{unnamed}", headers=admin)).json()["body"]
    assert body["subject"]["model"].startswith("mockllm/")
    lm_eval = await client.get(
        "/evaluations/api/reports", params={"subject": "f6f6", "limit": 5}, headers=admin
    )
    # lm-eval's own name for the model it ran (its results file beside the samples).
    model_name = json.loads((LM_EVAL / "results.json").read_text())["model_name"]
    assert {r["body"]["subject"].get("model") for r in lm_eval.json()["reports"]} == {model_name}


async def test_every_command_exits_by_one_table(
    project: Project,
    settings: Settings,
    inspect_logs: dict[str, Path],  # noqa: F811
    tmp_path: Path,
) -> None:
    log = str(inspect_logs["eval"])
    # A bad digest is a usage error said once, dry run or not.
    for dry_run in (["--dry-run"], []):
        code, out = await _cli(
            9, "unused", tmp_path, "import", "inspect", log, "--subject", "digest=abc",
            "--threshold", "0.5", *dry_run,
        )  # fmt: skip
        assert code == 64 and out.count("a digest is ALGORITHM:HEX") == 1, out
    # A file that does not exist: 66; a directory lm-eval can read: its samples.
    code, out = await _cli(
        None, "unused", tmp_path, "import", "inspect", str(tmp_path / "no.eval"),
        "--subject", "digest=sha1:" + "1" * 40, "--threshold", "0.5",
    )  # fmt: skip
    assert code == 66 and "no such file" in out, out
    code, out = await _cli(
        None, "unused", tmp_path, "import", "lm-eval", str(LM_EVAL), "--subject",
        "digest=sha1:" + "1" * 40, "--threshold", "0.3", "--dry-run",
    )  # fmt: skip
    assert code == 0 and '"total": ' in out, out
    # The wrong importer names the right one.
    for tool, path, right in (
        ("inspect", PROMPTFOO, "evalbook import promptfoo"),
        ("promptfoo", Path(log), "evalbook import inspect"),
        ("promptfoo", LM_EVAL / "samples_tiny_mc.jsonl", "evalbook import lm-eval"),
    ):
        code, out = await _cli(
            None, "unused", tmp_path, "import", tool, str(path), "--subject",
            "digest=sha1:" + "1" * 40, "--threshold", "0.5",
        )  # fmt: skip
        assert code == 2 and right in out, (tool, out)
    # (A permission that does not exist is a usage error: tests/routers/test_messages.py.)
    # Every command's help ends with the table.
    for command in (["verify-bundle"], ["diff"], ["import"], ["gate"], ["keys", "list"]):
        code, out = await _cli(None, None, tmp_path, *command, "--help")
        assert code == 0 and "66 not found" in out and "77 no permission" in out, (command, out)
    # No token anywhere: 77; the demo token `evalbook serve` keeps is used for a local service.
    subject = "sha1:" + "7" * 40
    code, out = await _cli(9, None, tmp_path, "gate", "--subject", subject)
    assert code == 77 and "no token" in out and ".evalbook/demo-token" in out, out
    token = await project.token("report.read")
    (tmp_path / ".evalbook").mkdir()
    (tmp_path / ".evalbook" / "demo-token").write_text(token + "\n")
    async with uvicorn_serving(create_app(settings)) as port:
        code, out = await _cli(port, None, tmp_path, "gate", "--subject", subject)
    assert code == 3 and "gate: missing" in out, out  # answered: the token was used


async def test_a_report_inconclusive_for_coverage_says_why(
    project: Project, settings: Settings
) -> None:
    token = await project.token(*WRITER)
    async with uvicorn_serving(create_app(settings)) as port:
        code, out = await _import(
            port, token, "promptfoo", str(PROMPTFOO), "--subject", "digest=sha1:" + "9" * 40,
            "--threshold", "0.5", "--min-coverage", "0.5", "--suite", "why-inconclusive",
        )  # fmt: skip
    assert code == 0, out
    assert re.search(r"^report \S+: inconclusive$", out, re.MULTILINE), out
    assert "why inconclusive: The evidence for the check" in out, out
    assert "a report passes only on complete evidence" in out, out
