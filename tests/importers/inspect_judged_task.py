"""A judged Inspect AI task the tests run offline on `mockllm` (docs/importing.md, "Human
labels"): 80 samples, a lenient `judge` scorer passing every good answer and about 40 % of the
bad ones, and people's verdicts carried two ways Inspect logs can hold them.

`-T route=scorer`: a second scorer, `human`, scores every sample as a person did (the importer's
`--label-scorer human`). `-T route=metadata`: the judge's own score carries the person's verdict
in `metadata.human_label` (and `labeller`) on the samples a person looked at (every third)."""

from __future__ import annotations

import random

import inspect_ai.model._model as _model
import inspect_ai.model._tokens as _tokens
from inspect_ai import Task, task
from inspect_ai.dataset import Sample
from inspect_ai.scorer import Score, Target, accuracy, scorer
from inspect_ai.solver import TaskState, generate


def _local_token_count(text: str, *args: object, **kwargs: object) -> int:
    # mockllm counts tokens with tiktoken, which downloads its encoding: there is no network.
    return max(1, len(text) // 4)


_tokens.count_text_tokens = _local_token_count  # type: ignore[assignment]
if hasattr(_model, "count_text_tokens"):
    _model.count_text_tokens = _local_token_count  # type: ignore[attr-defined]

_RNG = random.Random(51)
SAMPLES = []
for _i in range(80):
    _good = _RNG.random() < 0.7
    _lenient = _good or _RNG.random() < 0.4
    SAMPLES.append(
        Sample(
            id=f"q{_i:02d}",
            input=f"Question {_i}?",
            target="yes" if _good else "no",
            metadata={"good": _good, "judge_passes": _lenient, "looked_at": _i % 3 == 0},
        )
    )


@scorer(metrics=[accuracy()])
def judge(with_human_labels: bool = False):  # type: ignore[no-untyped-def]
    """A lenient judge; with `with_human_labels`, a person's verdict in its score's metadata."""

    async def score(state: TaskState, target: Target) -> Score:
        found = state.metadata
        metadata = None
        if with_human_labels and found["looked_at"]:
            metadata = {"human_label": "C" if found["good"] else "I", "labeller": "ana"}
        return Score(value="C" if found["judge_passes"] else "I", metadata=metadata)

    return score


@scorer(metrics=[accuracy()])
def human():  # type: ignore[no-untyped-def]
    """A person's verdict on each answer."""

    async def score(state: TaskState, target: Target) -> Score:
        return Score(value="C" if state.metadata["good"] else "I")

    return score


@task
def judged(route: str = "scorer") -> Task:
    """The task the judged importer tests run."""
    scorers = [judge(), human()] if route == "scorer" else [judge(with_human_labels=True)]
    return Task(dataset=SAMPLES, solver=[generate()], scorer=scorers)
