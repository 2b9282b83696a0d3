"""`evalbook labels requested|post` against a served process: the table, the file a labeller
fills in and sends back, `--json`, and the exit statuses of app.domain.exits for a wrong command
line, a bad file, refused labels (nothing stored), an unknown evaluation and a weak token."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import httpx

from app.api.main import create_app
from app.platform.config import Settings
from tests.clients.test_gate import cli_against
from tests.conftest import Project
from tests.judges.helpers import EXAMPLES, sampled, world
from tests.judges.test_labels_api import _running, _stored_labels
from tests.served import uvicorn_serving


def _fill(path: Path, truth: dict[str, bool], rater: dict[str, float], count: int) -> int:
    """Label the first `count` lines of a requested file as a careful human would."""
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    for line in lines[:count]:
        good = truth[line["example_id"]]
        if line["check_id"] == "accuracy":
            line["label"] = "pass" if good else "fail"
        else:
            line["label"] = 0.75 if good else 0.25
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return len(lines)


async def test_requested_then_post_round_trip(
    project: Project, client: httpx.AsyncClient, settings: Settings, tmp_path: Path
) -> None:
    _, evaluation_id = await _running(project, client)
    truth, _, rater = world()
    labeller = await project.token("label.write", "dataset.read_body", kind="labeller")
    reader = await project.token("report.read")
    wanted = len(sampled("accuracy")) + len(sampled("helpfulness"))
    todo = tmp_path / "todo.jsonl"
    async with uvicorn_serving(create_app(settings)) as port:
        code, out = await cli_against(port, reader, "labels", "requested", evaluation_id)
        assert code == 0, out
        assert f"accuracy: 0 of {len(sampled('accuracy'))} sampled examples labelled" in out
        assert out.count("\n") == wanted + 5, out  # a header, 2 totals, a blank, the columns

        code, out = await cli_against(
            port, labeller, "labels", "requested", evaluation_id, "--out", str(todo)
        )
        assert code == 0 and f"{wanted} examples to label" in out, out
        first = json.loads(todo.read_text().splitlines()[0])
        assert first["input"] == {"q": f"question {first['example_id']}"}
        assert first["label"] is None and first["labelled"] is False

        assert _fill(todo, truth, rater, 30) == wanted
        code, out = await cli_against(port, labeller, "labels", "post", evaluation_id, str(todo))
        assert code == 2 and "line 1 names no labeller" in out, out
        args = ("labels", "post", evaluation_id, str(todo), "--labeller", "ana", "--json")
        code, out = await cli_against(port, labeller, *args)
        assert code == 0, out
        assert json.loads(out) == {"accepted": 30, "unchanged": 0, "skipped": wanted - 30}
        code, out = await cli_against(port, labeller, *args[:-1])
        assert code == 0 and "0 labels stored, 30 already held" in out, out
        assert await _stored_labels(project, evaluation_id) == 30

        code, out = await cli_against(
            port, reader, "labels", "requested", evaluation_id, "--unlabelled", "--json"
        )
        assert code == 0, out
        answer = json.loads(out)
        assert sum(t["labelled"] for t in answer["totals"].values()) == 30
        assert len(answer["requested"]) == wanted


async def test_refusals_and_exit_statuses(
    project: Project, client: httpx.AsyncClient, settings: Settings, tmp_path: Path
) -> None:
    _, evaluation_id = await _running(project, client)
    labeller = await project.token("label.write", kind="labeller")
    user = await project.token("label.write", "report.read")
    outside = next(e for e in EXAMPLES if e not in sampled("accuracy"))
    inside = sampled("accuracy")[0]
    good = {"check_id": "accuracy", "example_id": inside, "label": "pass", "labeller": "ana"}
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(good) + "\n" + json.dumps({**good, "example_id": outside}) + "\n")
    garbled = tmp_path / "garbled.jsonl"
    garbled.write_text(json.dumps(good) + "\n{not json\n")
    fine = tmp_path / "fine.jsonl"
    fine.write_text(json.dumps(good) + "\n")
    empty = tmp_path / "empty.jsonl"
    empty.write_text(json.dumps({**good, "label": None}) + "\n")
    async with uvicorn_serving(create_app(settings)) as port:
        code, out = await cli_against(port, labeller, "labels", "post", evaluation_id, str(bad))
        assert code == 2 and "sample" in out and "nothing was stored" in out, out
        code, out = await cli_against(port, labeller, "labels", "post", evaluation_id, str(garbled))
        assert code == 2 and "line 2 is not JSON" in out, out
        code, out = await cli_against(port, labeller, "labels", "post", evaluation_id, str(empty))
        assert code == 2 and "holds no label (1 lines without one)" in out, out
        missing = str(tmp_path / "absent.jsonl")
        code, out = await cli_against(port, labeller, "labels", "post", evaluation_id, missing)
        assert code == 66, out
        code, out = await cli_against(port, user, "labels", "post", evaluation_id, str(fine))
        assert code == 77 and "labeller" in out, out
        assert await _stored_labels(project, evaluation_id) == 0

        unknown = str(uuid.uuid4())
        code, out = await cli_against(port, labeller, "labels", "post", unknown, str(fine))
        assert code == 66, out
        code, out = await cli_against(port, labeller, "labels", "requested", unknown)
        assert code == 66, out
        code, out = await cli_against(port, labeller, "labels", "requested", "nope")
        assert code == 64, out
        code, out = await cli_against(port, labeller, "labels", "post", evaluation_id)
        assert code == 64, out
        code, out = await cli_against(port, labeller, "labels", "post", evaluation_id, str(fine))
        assert code == 0 and "1 labels stored" in out, out
