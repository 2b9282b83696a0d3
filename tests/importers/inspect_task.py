"""A tiny Inspect AI task the tests run offline on the `mockllm` model, to import its real log.

mockllm answers "Default output from mockllm/model" to everything. Three scorers: `includes`
(C/I), a numeric length score in [0, 1], and `match` with a numeric-looking target. Sample
"s5" fails in its solver (recorded as a sample error, `fail_on_error=False`)."""

from __future__ import annotations

import inspect_ai.model._model as _model
import inspect_ai.model._tokens as _tokens
from inspect_ai import Task, task
from inspect_ai.dataset import Sample
from inspect_ai.scorer import Score, Target, includes, match, mean, scorer
from inspect_ai.solver import Generate, TaskState, generate, solver


def _local_token_count(text: str, *args: object, **kwargs: object) -> int:
    # mockllm counts tokens with tiktoken, which downloads its encoding: there is no network.
    return max(1, len(text) // 4)


_tokens.count_text_tokens = _local_token_count  # type: ignore[assignment]
if hasattr(_model, "count_text_tokens"):
    _model.count_text_tokens = _local_token_count  # type: ignore[attr-defined]


@solver
def refuse_boom():  # type: ignore[no-untyped-def]
    """Fails on the sample whose input says boom."""

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        if "boom" in state.input_text:
            raise RuntimeError("boom: this sample fails on purpose")
        return state

    return solve


@scorer(metrics=[mean()])
def length_score():  # type: ignore[no-untyped-def]
    """The completion's length over 50 characters, at most 1."""

    async def score(state: TaskState, target: Target) -> Score:
        return Score(value=min(len(state.output.completion) / 50, 1.0))

    return score


SAMPLES = [
    Sample(id="s1", input="Who answers?", target="mockllm", metadata={"lang": "en"}),
    Sample(id="s2", input="Capital of France?", target="Paris", metadata={"lang": "en"}),
    Sample(id="s3", input="Wer antwortet?", target="mockllm", metadata={"lang": "de"}),
    Sample(id="s4", input="Hauptstadt?", target="Berlin", metadata={"lang": "de"}),
    Sample(id="s5", input="boom", target="mockllm", metadata={"lang": "en"}),
    Sample(id=6, input="Default?", target="Default", metadata={"lang": "en"}),
]


@task
def tiny() -> Task:
    """The task the importer tests run."""
    return Task(
        dataset=SAMPLES,
        solver=[refuse_boom(), generate()],
        scorer=[includes(), length_score(), match(location="begin")],
        epochs=2,
        fail_on_error=False,
    )
