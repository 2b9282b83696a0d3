"""`evalbook import inspect` of a judged run (docs/judges.md, section 5): an Inspect log that
Inspect itself wrote, its people's verdicts read from a second scorer (`--label-scorer`) or
from the judge's `score.metadata`, sent as labels for the examples in the hash-chosen sample
only, and the check corrected to the number ppi-python 0.2.3 computes from the log as Inspect
reads it. Without a labeller token, or with a label scorer the log does not hold, nothing is
created."""

from __future__ import annotations

from pathlib import Path

import httpx
import numpy as np
import ppi_py
import pytest
from inspect_ai.log import read_eval_log_async

from app.api.main import create_app
from app.platform.config import Settings
from tests.conftest import Project
from tests.importers.inspect_run import run_inspect
from tests.importers.test_importers import (
    LM_EVAL,
    SUBJECT,
    WRITER,
    _import,
    _nothing_created,
    _report_id,
)
from tests.judges.helpers import plain_draw
from tests.served import uvicorn_serving

JUDGED = ("--threshold", "0.65", "--label-fraction", "0.5", "--min-labels", "10")
SEED = "inspect.judged"  # the dataset's name, the sample's seed by default


@pytest.fixture(scope="module")
def judged_logs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The judged task of tests/importers run by Inspect, once per route of its labels."""
    logs = {}
    for route in ("scorer", "metadata"):
        log_dir = tmp_path_factory.mktemp(f"inspect-judged-{route}")
        logs[route] = run_inspect(
            log_dir, "json", "-T", f"route={route}", task_file="inspect_judged_task.py"
        )
    return logs


async def _expected(path: Path, route: str) -> tuple[float, float, float, list[str]]:
    """θ and the PPI interval ppi-python computes from the log as Inspect reads it, and the
    examples whose labels count."""
    log = await read_eval_log_async(str(path))
    assert log.samples
    judged, truth, labelled = {}, {}, []
    for sample in log.samples:
        example = str(sample.id)
        judged[example] = float(sample.scores["judge"].value == "C")
        if route == "scorer":
            truth[example] = float(sample.scores["human"].value == "C")
        elif sample.scores["judge"].metadata:
            truth[example] = float(sample.scores["judge"].metadata["human_label"] == "C")
        if example in truth and plain_draw(SEED, "judge", example) < 0.5:
            labelled.append(example)
    others = [e for e in judged if e not in set(labelled)]
    y = np.array([truth[e] for e in labelled])
    yhat = np.array([judged[e] for e in labelled])
    yhat_u = np.array([judged[e] for e in others])
    theta = float(np.asarray(ppi_py.ppi_mean_pointestimate(y, yhat, yhat_u)).item())
    lower, upper = ppi_py.ppi_mean_ci(y, yhat, yhat_u, alpha=0.05)
    return theta, max(0.0, float(lower[0])), min(1.0, float(upper[0])), labelled


@pytest.mark.parametrize("route", ["scorer", "metadata"])
async def test_a_judged_inspect_run_is_corrected_by_its_labels(
    project: Project,
    client: httpx.AsyncClient,
    settings: Settings,
    judged_logs: dict[str, Path],
    route: str,
) -> None:
    path = judged_logs[route]
    theta, lower, upper, labelled = await _expected(path, route)
    token = await project.token(*WRITER)
    labeller = await project.token("label.write", kind="labeller")
    admin = await project.admin()
    args = ["inspect", str(path), "--subject", SUBJECT, *JUDGED, "--label-token", labeller]
    if route == "scorer":
        args += ["--label-scorer", "human"]
    async with uvicorn_serving(create_app(settings)) as port:
        code, out = await _import(port, token, *args)
        assert code == 0, out
        assert f"judged check judge: {len(labelled)} human labels in its sample" in out
        found = await client.get(f"/evaluations/api/reports/{_report_id(out)}", headers=admin)
    body = found.json()["body"]
    checks = {check["check_id"]: check for check in body["checks"]}
    # The label scorer is no check of its own.
    assert list(checks) == ["judge"]
    judge = checks["judge"]
    assert judge["calibration"]["labelled"] == len(labelled)
    # The judge alone would pass (0.70 against the threshold 0.65); its labels say less.
    assert judge["calibration"]["judge_score"] > 0.65 > theta
    assert judge["score"] == pytest.approx(theta, abs=1e-9)
    assert judge["interval"]["lower"] == pytest.approx(lower, abs=1e-9)
    assert judge["interval"]["upper"] == pytest.approx(upper, abs=1e-9)
    assert judge["assurance"] == "reported"  # the cases' assurance, below the labels'
    if route == "scorer":
        # Every sampled example holds a label: nothing is missing, and the labels decide.
        assert judge["coverage"]["labels_missing"] == 0
        assert judge["status"] == "fail"
    else:
        # A person looked at every third sample: the sample's others are still to label.
        assert judge["coverage"]["labels_missing"] > 0
        assert body["result"] != "pass"


async def test_labels_without_a_labeller_token_or_a_known_scorer_create_nothing(
    project: Project, client: httpx.AsyncClient, settings: Settings, judged_logs: dict[str, Path]
) -> None:
    token = await project.token(*WRITER)
    admin = await project.admin()
    path = str(judged_logs["scorer"])
    async with uvicorn_serving(create_app(settings)) as port:
        code, out = await _import(
            port, token, "inspect", path, "--subject", SUBJECT, *JUDGED, "--label-scorer", "human"
        )
        assert code == 77 and "labeller token" in out, out
        args = ("inspect", path, "--subject", SUBJECT, *JUDGED, "--label-scorer", "nobody")
        code, out = await _import(port, token, *args, "--label-token", "x")
        assert code == 2 and "--label-scorer nobody: no such scorer" in out, out
        code, out = await _import(port, token, *args[:-1], "human=nobody", "--label-token", "x")
        assert code == 2 and "name the check its scores label" in out, out
        code, out = await _import(
            port, token, "lm-eval", str(LM_EVAL), "--subject", SUBJECT, *JUDGED,
            "--label-scorer", "human",
        )  # fmt: skip
        assert code == 64 and "Inspect logs" in out, out
        code, out = await _import(port, token, *args[:-2], "--min-labels", "1")
        assert code == 64 and "--min-labels 1" in out, out
    await _nothing_created(client, admin)
