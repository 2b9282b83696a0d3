"""`evalbook import` end to end, on files the tools wrote themselves: an Inspect log made here
on the offline `mockllm` model, lm-eval and promptfoo output committed with their generators
(tests/data/importers). Each report is checked against what the tool itself computed; bad
files are refused naming file, line and field, with nothing created on the service."""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys
import zipfile
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from inspect_ai.log import read_eval_log_async
from inspect_ai.scorer import value_to_float

from app.api.main import create_app
from app.platform.config import Settings
from tests.conftest import REPO, Project
from tests.importers.inspect_run import run_inspect
from tests.served import uvicorn_serving

DATA = REPO / "tests" / "data" / "importers"
LM_EVAL = DATA / "lm_eval" / "output"
PROMPTFOO = DATA / "promptfoo" / "results.json"
WRITER = ["scorer.write", "dataset.write", "suite.write", "evaluation.write", "report.read"]
SUBJECT = "digest=sha1:" + "4f1c" * 10 + ",name=mock"


@pytest.fixture(scope="session")
def inspect_logs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The tiny task of tests/importers run by Inspect itself, logged as .eval and as .json."""
    logs = {}
    for log_format in ("eval", "json"):
        log_dir = tmp_path_factory.mktemp(f"inspect-{log_format}")
        logs[log_format] = run_inspect(log_dir, log_format)
    return logs


async def _import(port: int | None, token: str, *args: str) -> tuple[int, str]:
    url = f"http://127.0.0.1:{port}" if port else "http://127.0.0.1:9"
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "app.cli.main",
        "import",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        cwd=REPO,
        env={**os.environ, "EVALBOOK_URL": url, "EVALBOOK_TOKEN": token},
    )
    output, _ = await asyncio.wait_for(process.communicate(), 300)
    assert process.returncode is not None
    return process.returncode, output.decode()


def _report_id(output: str) -> str:
    match = re.search(r"^report ([0-9a-f-]{36}): ", output, re.MULTILINE)
    assert match, output
    return match[1]


async def _evaluation(
    client: httpx.AsyncClient, headers: dict[str, str], report: dict[str, Any]
) -> dict[str, Any]:
    answer = await client.get(
        f"/api/v1/evaluations/{report['body']['evaluation_id']}", headers=headers
    )
    assert answer.status_code == 200
    evaluation: dict[str, Any] = answer.json()
    return evaluation


async def _nothing_created(client: httpx.AsyncClient, headers: dict[str, str]) -> None:
    for path, key in (
        ("/api/v1/scorers", "scorers"),
        ("/api/v1/datasets", "datasets"),
        ("/api/v1/suites", "suites"),
        ("/evaluations/api/reports", "reports"),
    ):
        answer = await client.get(path, headers=headers)
        assert answer.status_code == 200 and answer.json()[key] == [], (path, answer.text)


@pytest.mark.parametrize("log_format", ["eval", "json"])
async def test_an_inspect_log_becomes_the_report_inspect_computed(
    project: Project,
    client: httpx.AsyncClient,
    settings: Settings,
    inspect_logs: dict[str, Path],
    log_format: str,
) -> None:
    path = inspect_logs[log_format]
    # The async reader: the sync one, called under a running loop, patches that loop with
    # nest_asyncio, which then fails in later tests that share it.
    log = await read_eval_log_async(str(path))
    assert log.samples and log.results
    token = await project.token(*WRITER)
    admin = await project.admin()
    args = ("inspect", str(path), "--subject", SUBJECT, "--threshold", "0.5")
    args += ("--min-coverage", "0.8", "--slice", "lang:de")
    async with uvicorn_serving(create_app(settings)) as port:
        code, out = await _import(port, token, *args)
        assert code == 0, out
        report = (
            await client.get(f"/evaluations/api/reports/{_report_id(out)}", headers=admin)
        ).json()
        # Imported again: the same definitions, evaluation and report.
        code, again = await _import(port, token, *args)
        assert code == 0 and _report_id(again) == report["report_id"], again
        assert "imported before" in again
    checks = {c["check_id"]: c for c in report["body"]["checks"]}
    to_float = value_to_float()
    for scored in log.results.scores:
        metric = next(iter(m for m in scored.metrics.values() if m.name in ("accuracy", "mean")))
        assert checks[scored.name]["score"] == pytest.approx(metric.value), scored.name
        executed = checks[scored.name]["coverage"]["executed"]
        assert executed == scored.scored_samples
    # Every (sample, epoch) as the log holds it: a status per scorer.
    evaluation = await _evaluation(client, admin, report)
    by_check = {c["check_id"]: c["by_status"] for c in evaluation["checks"]}
    for scorer in ("includes", "match", "length_score"):
        expected: Counter[str] = Counter()
        for sample in log.samples:
            if sample.error:
                expected["error"] += 1
            elif scorer == "length_score":
                value = to_float(sample.scores[scorer].value)
                expected["pass" if value >= 0.5 else "fail"] += 1
            else:
                expected["pass" if sample.scores[scorer].value == "C" else "fail"] += 1
        assert by_check[scorer] == dict(expected), scorer
    assert checks["includes"]["slices"][0]["name"] == "lang:de"
    assert report["body"]["result"] == "fail"  # match: 0.2 < 0.5


async def test_lm_eval_samples_become_the_report_lm_eval_computed(
    project: Project, client: httpx.AsyncClient, settings: Settings
) -> None:
    results = json.loads((LM_EVAL / "results.json").read_text())
    token = await project.token(*WRITER)
    admin = await project.admin()
    files = sorted(str(p) for p in LM_EVAL.glob("samples_*.jsonl"))
    async with uvicorn_serving(create_app(settings)) as port:
        code, out = await _import(
            port, token, "lm-eval", *files, "--subject", SUBJECT, "--threshold", "0.3"
        )
    assert code == 0, out
    report = (await client.get(f"/evaluations/api/reports/{_report_id(out)}", headers=admin)).json()
    checks = {c["check_id"]: c for c in report["body"]["checks"]}
    assert set(checks) == {"tiny_mc.acc", "tiny_mc.acc_norm", "tiny_gen.exact_match"}
    for task, task_results in results["results"].items():
        for key, value in task_results.items():
            metric, _, filter_name = key.partition(",")
            if (
                filter_name != "none"
                or metric.endswith("_stderr")
                or metric in ("name", "alias", "sample_len")
            ):
                continue
            check = checks[f"{task}.{metric}"]
            assert check["score"] == pytest.approx(value)
            assert check["coverage"]["expected"] == results["n-samples"][task]["effective"]
    evaluation = await _evaluation(client, admin, report)
    passes = {c["check_id"]: c["by_status"].get("pass", 0) for c in evaluation["checks"]}
    for path in LM_EVAL.glob("samples_*.jsonl"):
        task = path.stem.removeprefix("samples_")
        lines = [json.loads(line) for line in path.read_text().splitlines()]
        for metric in lines[0]["metrics"]:
            assert passes[f"{task}.{metric}"] == sum(line[metric] == 1.0 for line in lines)


async def test_promptfoo_results_become_the_report_promptfoo_computed(
    project: Project, client: httpx.AsyncClient, settings: Settings
) -> None:
    output = json.loads(PROMPTFOO.read_text())["results"]
    token = await project.token(*WRITER)
    admin = await project.admin()
    async with uvicorn_serving(create_app(settings)) as port:
        code, out = await _import(
            port,
            token,
            "promptfoo",
            str(PROMPTFOO),
            "--subject",
            SUBJECT,
            "--threshold",
            "0.7",
            "--min-coverage",
            "0.5",
            "--slice",
            "lang:de",
            "--suite",
            "echoes",
        )
    assert code == 0, out
    report = (await client.get(f"/evaluations/api/reports/{_report_id(out)}", headers=admin)).json()
    assert report["body"]["suite_ref"]["name"] == "echoes"
    evaluation = await _evaluation(client, admin, report)
    by_check = {c["check_id"]: c["by_status"] for c in evaluation["checks"]}
    for prompt in output["prompts"]:
        label = "flaky" if "flaky" in prompt["provider"] else prompt["provider"]
        counts = by_check[label]
        metrics = prompt["metrics"]
        assert counts.get("pass", 0) == metrics["testPassCount"]
        # promptfoo counts a provider error as a failed test and as an error.
        assert counts.get("error", 0) == sum(
            r["failureReason"] == 2
            for r in output["results"]
            if r["promptIdx"] == output["prompts"].index(prompt)
        )
        assert (
            counts.get("fail", 0) + counts.get("error", 0)
            == metrics["testFailCount"] + metrics["testErrorCount"]
        )
    assert sum(c.get("pass", 0) for c in by_check.values()) == output["stats"]["successes"]
    checks = {c["check_id"]: c for c in report["body"]["checks"]}
    assert checks["echo"]["score"] == pytest.approx(12 / 15)


async def test_a_comparison_with_a_baseline_run(
    project: Project, client: httpx.AsyncClient, settings: Settings, inspect_logs: dict[str, Path]
) -> None:
    token = await project.token(*WRITER)
    admin = await project.admin()
    rule = [
        "--threshold",
        "0.5",
        "--rule",
        "non_inferiority",
        "--margin",
        "0.1",
        "--min-coverage",
        "0.8",
        "--suite",
        "tiny-compared",
    ]
    async with uvicorn_serving(create_app(settings)) as port:
        code, out = await _import(
            port,
            token,
            "inspect",
            str(inspect_logs["eval"]),
            "--subject",
            "digest=sha1:" + "a" * 40,
            "--mode",
            "experiment",
            *rule,
        )
        assert code == 0, out
        baseline = re.search(r"^evaluation (\S+)", out, re.MULTILINE)
        assert baseline
        code, out = await _import(
            port,
            token,
            "inspect",
            str(inspect_logs["json"]),
            "--subject",
            "digest=sha1:" + "b" * 40,
            "--baseline",
            baseline[1],
            *rule,
        )
        assert code == 0, out
    report = (await client.get(f"/evaluations/api/reports/{_report_id(out)}", headers=admin)).json()
    comparisons = [c["comparison"] for c in report["body"]["checks"]]
    assert all(c["baseline_evaluation_id"] == baseline[1] for c in comparisons)
    # The same outputs on both sides: every pair shows no difference.
    assert all(c["pairs"] >= 5 for c in comparisons), comparisons


async def _dry_run(inspect_logs: dict[str, Path], *extra: str) -> tuple[int, str]:
    """Import the Inspect log with --dry-run (no service: nothing is sent)."""
    arguments = ["--subject", SUBJECT, "--threshold", "0.5", "--dry-run", *extra]
    return await _import(None, "unused", "inspect", str(inspect_logs["eval"]), *arguments)


async def test_dry_run_prints_the_plan_and_sends_nothing(inspect_logs: dict[str, Path]) -> None:
    code, out = await _dry_run(inspect_logs)
    assert code == 0, out
    # What the import chose is said first (on stderr), then the plan.
    assert out.startswith("suite tiny, version c") and "mode gate:" in out, out
    plan = json.loads(out[out.index("{") :])
    assert [s["name"] for s in plan["scorers"]] == [
        "inspect.includes",
        "inspect.length_score",
        "inspect.match",
    ]
    assert plan["scorers"][1]["score_range"] == [0.0, 1.0]
    assert plan["datasets"] == [
        {"name": "inspect.tiny", "version": plan["datasets"][0]["version"], "examples": 6}
    ]
    assert plan["cases"]["total"] == 36
    assert plan["suite"]["checks"][0]["repeats"] == 2
    assert plan["evaluation"]["subject"] == {"digest": "sha1:" + "4f1c" * 10, "name": "mock"}


def _rewrite_zip(source: Path, target: Path, edit: Any) -> None:
    import zipfile_zstd  # noqa: F401  (Inspect's own dependency reads its zstd members)

    with zipfile.ZipFile(source) as old, zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as new:
        for name in old.namelist():
            data = old.read(name)
            new.writestr(name, edit(name, data))


async def test_bad_files_are_named_and_nothing_is_created(
    project: Project,
    client: httpx.AsyncClient,
    settings: Settings,
    inspect_logs: dict[str, Path],
    tmp_path: Path,
) -> None:
    token = await project.token(*WRITER)
    admin = await project.admin()
    unknown_field = tmp_path / "unknown.eval"
    _rewrite_zip(
        inspect_logs["eval"],
        unknown_field,
        lambda name, data: (
            json.dumps({**json.loads(data), "bogus": 1}).encode()
            if name == "samples/s2_epoch_1.json"
            else data
        ),
    )
    truncated_eval = tmp_path / "truncated.eval"
    truncated_eval.write_bytes(inspect_logs["eval"].read_bytes()[:-300])
    truncated_json = tmp_path / "truncated.json"
    text = inspect_logs["json"].read_text()
    truncated_json.write_text(text[: len(text) // 2])
    lines = (LM_EVAL / "samples_tiny_gen.jsonl").read_text().splitlines()
    lm_unknown = tmp_path / "samples_tiny_gen.jsonl"
    lm_unknown.write_text(
        "\n".join([*lines[:2], json.dumps({**json.loads(lines[2]), "bogus": 1}), *lines[3:]]) + "\n"
    )
    lm_broken = tmp_path / "samples_tiny_mc_2026-11-30T10-00-00.000001.jsonl"
    lm_broken.write_text(lines[0] + "\n" + lines[1][:40] + "\n")
    pf = json.loads(PROMPTFOO.read_text())
    pf["results"]["results"][4]["bogus"] = True
    pf_unknown = tmp_path / "results.json"
    pf_unknown.write_text(json.dumps(pf, indent=2))
    cases = [
        (["inspect", str(PROMPTFOO)], r"results.json: eval: not an Inspect log"),
        (
            ["promptfoo", str(inspect_logs["json"])],
            r"\.json: results.version: not promptfoo output",
        ),
        (
            ["lm-eval", str(LM_EVAL / "results.json")],
            r"results.json: an lm-eval samples file is named",
        ),
        (
            ["inspect", str(unknown_field)],
            r"unknown.eval:samples/s2_epoch_1.json: bogus: unknown sample field",
        ),
        (["inspect", str(truncated_eval)], r"truncated.eval: "),
        (["inspect", str(truncated_json)], r"truncated.json:\d+: not valid JSON"),
        (["lm-eval", str(lm_unknown)], r"samples_tiny_gen.jsonl:3: bogus: unknown sample field"),
        (
            ["lm-eval", str(lm_broken)],
            r"samples_tiny_mc_2026-11-30T10-00-00.000001.jsonl:2: not a JSON line",
        ),
        (
            ["promptfoo", str(pf_unknown)],
            r"results.json:\d+: results.results\[4\].bogus: unknown result field",
        ),
    ]
    async with uvicorn_serving(create_app(settings)) as port:
        for args, message in cases:
            code, out = await _import(
                port, token, *args, "--subject", SUBJECT, "--threshold", "0.5"
            )
            assert code == 2, out
            assert re.search(message, out), (message, out)
            assert "Traceback" not in out
    await _nothing_created(client, admin)
    # The lines a truncated JSON log breaks off at: the line it names is the end of the text.
    code, out = await _import(
        None, "unused", "inspect", str(truncated_json), "--subject", SUBJECT, "--threshold", "0.5"
    )
    assert f":{len(truncated_json.read_text().splitlines())}:" in out or "not valid JSON" in out


async def test_a_refused_batch_cancels_the_evaluation(
    project: Project, client: httpx.AsyncClient, settings: Settings, tmp_path: Path
) -> None:
    """A case the service refuses (an integer beyond I-JSON's exact range in an output) after
    the start: the evaluation is cancelled, not left running."""
    lines = (LM_EVAL / "samples_tiny_gen.jsonl").read_text().splitlines()
    edited = json.loads(lines[4])
    edited["filtered_resps"] = [9007199254740993]
    path = tmp_path / "samples_tiny_gen.jsonl"
    path.write_text("\n".join([*lines[:4], json.dumps(edited), *lines[5:]]) + "\n")
    token = await project.token(*WRITER)
    admin = await project.admin()
    async with uvicorn_serving(create_app(settings)) as port:
        code, out = await _import(
            port, token, "lm-eval", str(path), "--subject", SUBJECT, "--threshold", "0.5"
        )
    assert code == 2, out
    match = re.search(r"evaluation (\S+) was cancelled", out)
    assert match, out
    answer = await client.get(f"/api/v1/evaluations/{match[1]}", headers=admin)
    assert answer.json()["status"] == "cancelled"
    assert "422" in out


async def test_progress_bars_on_request(inspect_logs: dict[str, Path]) -> None:
    code, out = await _dry_run(inspect_logs, "--progress")
    assert code == 0 and "reading: " in out and "records" in out, out


async def test_a_changed_rule_never_supersedes_another_subjects_report(
    project: Project, client: httpx.AsyncClient, settings: Settings, inspect_logs: dict[str, Path]
) -> None:
    token = await project.token(*WRITER)
    admin = await project.admin()
    log = str(inspect_logs["eval"])
    first, second = "digest=sha1:" + "c" * 40, "digest=sha1:" + "d" * 40
    async with uvicorn_serving(create_app(settings)) as port:
        code, out = await _import(
            port,
            token,
            "inspect",
            log,
            "--subject",
            first,
            "--suite",
            "guarded",
            "--threshold",
            "0.5",
        )
        assert code == 0, out
        kept = _report_id(out)
        other = ["--subject", second, "--suite", "guarded", "--threshold", "0.35"]
        code, out = await _import(port, token, "inspect", log, *other, "--dry-run")
        assert code == 2, out
        plan = json.loads(out[out.index("{") :])
        assert plan["activation"]["supersedes"] == [kept] and "--activate" in out
        code, out = await _import(port, token, "inspect", log, *other)
        assert code == 2 and "--activate" in out and "1 current report" in out, out
        envelope = (await client.get(f"/evaluations/api/reports/{kept}", headers=admin)).json()
        assert envelope["envelope"]["status"] == "current"
        nothing = await client.get(
            "/evaluations/api/reports/forSubject",
            params={"digest": "sha1:" + "d" * 40},
            headers=admin,
        )
        assert nothing.json()["reports"] == []
        code, out = await _import(port, token, "inspect", log, *other, "--activate")
        assert code == 0, out
        assert f"supersedes 1 current report(s):\n  {kept}" in out
    envelope = (await client.get(f"/evaluations/api/reports/{kept}", headers=admin)).json()
    assert envelope["envelope"]["status"] == "superseded"


async def test_bad_options_and_wrong_files_are_refused_before_anything_is_sent(
    inspect_logs: dict[str, Path], tmp_path: Path
) -> None:
    log = str(inspect_logs["eval"])
    for args, message in (
        (["--threshold", "35"], "--threshold 35: check"),
        (["--threshold", "0.5", "--slice", "lang:dee"], "--slice lang:dee: no example carries"),
        (["--threshold", "0.5", "--alpha", "2"], "--alpha 2: must be within"),
        (["--threshold", "0.5", "--baseline", "x"], "choose a comparing --rule"),
    ):
        for dry_run in ([], ["--dry-run"]):
            code, out = await _import(
                None, "unused", "inspect", log, "--subject", SUBJECT, *args, *dry_run
            )
            assert code == 64 and message in out, (args, out)
    config = tmp_path / "promptfooconfig.yaml"
    config.write_text("prompts:\n  - 'Say {{x}}'\nproviders: [echo]\n")
    archive = tmp_path / "results.zip"
    with zipfile.ZipFile(archive, "w") as bundle:
        bundle.write(PROMPTFOO, "results.json")
    for path, kind in ((config, "a YAML file"), (archive, "a zip archive")):
        code, out = await _import(
            None, "unused", "promptfoo", str(path), "--subject", SUBJECT, "--threshold", "0.5"
        )
        assert code == 2 and kind in out and "promptfoo eval -o results.json" in out, out


@pytest.mark.parametrize("log_format", ["eval", "json"])
async def test_an_inspect_log_gives_its_time_and_tokens_as_measures(
    project: Project,
    client: httpx.AsyncClient,
    settings: Settings,
    inspect_logs: dict[str, Path],
    log_format: str,
) -> None:
    path = inspect_logs[log_format]
    log = await read_eval_log_async(str(path))
    assert log.samples
    token = await project.token(*WRITER)
    admin = await project.admin()
    args = ("inspect", str(path), "--subject", SUBJECT, "--threshold", "0.5")
    args += ("--min-coverage", "0.5", "--suite", f"timed-{log_format}")
    args += ("--measure-check", "latency_ms@includes:quantile:0.9:600000:lower")
    args += ("--measure-check", "total_tokens@includes:mean:100000:lower")
    async with uvicorn_serving(create_app(settings)) as port:
        code, out = await _import(port, token, *args)
    assert code == 0, out
    report = (await client.get(f"/evaluations/api/reports/{_report_id(out)}", headers=admin)).json()
    checks = {c["check_id"]: c for c in report["body"]["checks"]}
    # What Inspect's own reader says of each sample, averaged over its epochs.
    latency: dict[Any, list[float]] = {}
    tokens: dict[Any, list[float]] = {}
    for sample in log.samples:
        if sample.error or sample.scores is None or "includes" not in sample.scores:
            continue
        latency.setdefault(sample.id, []).append(sample.total_time * 1000)
        usage = sample.model_usage.values()
        tokens.setdefault(sample.id, []).append(sum(u.total_tokens for u in usage))
    per_example = [sum(v) / len(v) for v in latency.values()]
    p90 = float(np.quantile(per_example, 0.9, method="inverted_cdf"))
    assert checks["latency_ms-p90"]["score"] == pytest.approx(p90, rel=1e-11)
    assert checks["latency_ms-p90"]["measure"] == {"of": "includes", "name": "latency_ms"}
    mean_tokens = np.mean([sum(v) / len(v) for v in tokens.values()])
    assert checks["total_tokens-mean"]["score"] == pytest.approx(mean_tokens, rel=1e-11)


async def test_promptfoo_latency_and_cost_become_measures(
    project: Project, client: httpx.AsyncClient, settings: Settings
) -> None:
    output = json.loads(PROMPTFOO.read_text())["results"]
    token = await project.token(*WRITER)
    admin = await project.admin()
    args = ("promptfoo", str(PROMPTFOO), "--subject", SUBJECT, "--threshold", "0.7")
    args += ("--min-coverage", "0.5", "--suite", "timed-echoes")
    args += ("--measure-check", "latency_ms@echo:quantile:0.5:1000:lower")
    args += ("--measure-check", "cost_usd@echo:mean:1:lower")
    async with uvicorn_serving(create_app(settings)) as port:
        code, out = await _import(port, token, *args)
    assert code == 0, out
    report = (await client.get(f"/evaluations/api/reports/{_report_id(out)}", headers=admin)).json()
    checks = {c["check_id"]: c for c in report["body"]["checks"]}
    echo = output["prompts"].index(next(p for p in output["prompts"] if p["provider"] == "echo"))
    by_test: dict[str, list[float]] = {}
    for result in output["results"]:
        if result["promptIdx"] == echo and result["failureReason"] != 2:
            key = json.dumps(result["testCase"].get("vars"), sort_keys=True)
            by_test.setdefault(key, []).append(float(result["latencyMs"]))
    median = float(
        np.quantile([sum(v) / len(v) for v in by_test.values()], 0.5, method="inverted_cdf")
    )
    assert checks["latency_ms-p50"]["score"] == pytest.approx(median, rel=1e-11)
    assert checks["latency_ms-p50"]["status"] == "pass"
    assert checks["cost_usd-mean"]["score"] == 0.0


async def test_a_bad_measure_check_option_is_refused_before_anything_is_sent(
    project: Project, client: httpx.AsyncClient
) -> None:
    token = await project.token(*WRITER)
    for spec in ("latency_ms:quantile:x:1", "latency_ms:median:1", "latency_ms"):
        code, out = await _import(
            None,
            token,
            "promptfoo",
            str(PROMPTFOO),
            "--subject",
            SUBJECT,
            "--threshold",
            "0.5",
            "--measure-check",
            spec,
        )
        assert code == 64 and "--measure-check" in out, out
    await _nothing_created(client, await project.admin())
