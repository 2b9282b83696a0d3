"""promptfoo results (`promptfoo eval -o results.json`, results format v2 and v3), streamed.

Each provider (and prompt, when there are several) is a check, judged pass/fail as promptfoo
judges it: success is pass, an assertion failure fail, an error (`failureReason` 2) error. Each
distinct test case is an example (its description as id when it has one); `--repeat N` gives
repeats, numbered in the order promptfoo wrote them. The test's metadata become tags."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import rfc8785

from app.cli.importers import jsonstream
from app.cli.importers.source import (
    CheckSource,
    Record,
    SourceError,
    SourceRun,
    Value,
    identifier,
    measures_of,
    tag,
)

# The fields of a result as promptfoo (up to 0.118) writes them.
RESULT_FIELDS = frozenset(
    [
        "cost",
        "description",
        "error",
        "failureReason",
        "gradingResult",
        "id",
        "latencyMs",
        "metadata",
        "namedScores",
        "prompt",
        "promptId",
        "promptIdx",
        "provider",
        "response",
        "score",
        "success",
        "testCase",
        "testIdx",
        "tokenUsage",
        "vars",
    ]
)
DATASET = "tests"


class PromptfooResults:
    """One promptfoo output file."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._checks: dict[str, CheckSource] = {}
        self._prompts: dict[str, int] | None = None

    def describe(self) -> SourceRun:
        """The eval's description; the checks (providers) are found in the results."""
        version = jsonstream.first(self.path, "results.version")
        if not isinstance(version, int | float):
            raise SourceError(
                self.path, "not promptfoo output (no results.version)", field="results.version"
            )
        description = jsonstream.first(self.path, "config.description")
        name = description if isinstance(description, str) else "promptfoo"
        summary = {"stats": jsonstream.first(self.path, "results.stats")}
        return SourceRun("promptfoo", name, [], [self.path], summary)

    def check(self, check_id: str) -> CheckSource:
        """A check seen in the results."""
        return self._checks[check_id]

    def records(self) -> Iterator[Record]:
        """Each result, as one record (repeats numbered per test case and check)."""
        prompts = self._prompt_numbers()
        examples: dict[bytes, str] = {}
        ids: set[str] = set()
        repeats: dict[tuple[str, str], int] = {}
        for i, (result, line) in enumerate(jsonstream.items(self.path, "results.results.item")):
            yield self._record(result, i, line, prompts, examples, ids, repeats)

    def _prompt_numbers(self) -> dict[str, int]:
        """Each distinct prompt's number (promptfoo lists a prompt once per provider)."""
        if self._prompts is None:
            self._prompts = {}
            for prompt, _ in jsonstream.items(self.path, "results.prompts.item"):
                key = str(prompt.get("id") or prompt.get("raw")) if isinstance(prompt, dict) else ""
                self._prompts.setdefault(key, len(self._prompts))
        return self._prompts

    def _record(
        self,
        result: Any,
        index: int,
        line: int,
        prompts: dict[str, int],
        examples: dict[bytes, str],
        ids: set[str],
        repeats: dict[tuple[str, str], int],
    ) -> Record:
        where = f"results.results[{index}]"

        def fail(field: str, message: str) -> SourceError:
            return SourceError(self.path, message, line=line, field=f"{where}.{field}")

        if not isinstance(result, dict):
            raise fail("", "a result is an object")
        unknown = sorted(set(result) - RESULT_FIELDS)
        if unknown:
            raise fail(unknown[0], "unknown result field (read: promptfoo output up to 0.118)")
        test = result.get("testCase")
        if not isinstance(test, dict):
            raise fail("testCase", "a result names its test case")
        provider = result.get("provider")
        if not isinstance(provider, dict) or not isinstance(provider.get("id"), str):
            raise fail("provider.id", "a result names its provider")
        label = provider.get("label") or provider["id"]
        prompt = prompts.get(str(result.get("promptId")), result.get("promptIdx", 0))
        check_id = identifier(f"{label}.p{prompt}" if len(prompts) > 1 else str(label))
        if check_id not in self._checks:
            definition = {"provider": provider["id"], "label": label, "prompt": prompt}
            self._checks[check_id] = CheckSource(check_id, DATASET, "promptfoo", definition)
        example_id = _example_id(test, examples, ids)
        repeat = repeats.get((example_id, check_id), 0)
        repeats[(example_id, check_id)] = repeat + 1
        value = _value(result)
        if value is None:
            raise fail("failureReason", "0 (success), 1 (assertion failed) or 2 (error)")
        output, tags = _output_and_tags(result, test)
        body = _test_identity(test)
        return Record(
            DATASET,
            example_id,
            repeat,
            body,
            tags,
            {check_id: value},
            {check_id: output},
            where,
            line,
            _measures(result),
        )


def _measures(result: dict[str, Any]) -> dict[str, float]:
    """What promptfoo recorded of a result's time, cost and tokens: `latencyMs`, `cost` and
    `tokenUsage` (the result's, else its response's) as latency_ms, cost_usd and tokens."""
    response = result["response"] if isinstance(result.get("response"), dict) else {}
    usage = result.get("tokenUsage") or response.get("tokenUsage")
    usage = usage if isinstance(usage, dict) else {}
    return measures_of(
        latency_ms=result.get("latencyMs"),
        cost_usd=result.get("cost"),
        input_tokens=usage.get("prompt"),
        output_tokens=usage.get("completion"),
        total_tokens=usage.get("total"),
    )


def _example_id(test: dict[str, Any], examples: dict[bytes, str], ids: set[str]) -> str:
    """The example id of a test case: the same test, the same id; a new one from its
    description, made unique."""
    key = hashlib.sha256(rfc8785.dumps(_test_identity(test))).digest()
    if key not in examples:
        base = identifier(test.get("description") or f"test-{len(examples) + 1}")
        example_id, n = base, 1
        while example_id in ids:
            n += 1
            example_id = identifier(f"{base[:190]}-{n}")
        examples[key] = example_id
        ids.add(example_id)
    return examples[key]


def _value(result: dict[str, Any]) -> Value | None:
    """A result's outcome from its failureReason (or success), None when neither says."""
    reason = result.get("failureReason")
    if reason == 2:
        return "error"
    if reason in (0, 1) or (reason is None and isinstance(result.get("success"), bool)):
        return bool(result.get("success"))
    return None


def _output_and_tags(
    result: dict[str, Any], test: dict[str, Any]
) -> tuple[dict[str, Any], list[str]]:
    """A result's output (the response, its score, any error) and its test's metadata tags."""
    response: dict[str, Any] = (
        result["response"] if isinstance(result.get("response"), dict) else {}
    )
    output: dict[str, Any] = {"output": response.get("output"), "score": result.get("score")}
    if result.get("error"):
        output["error"] = result["error"]
    metadata: dict[str, Any] = test["metadata"] if isinstance(test.get("metadata"), dict) else {}
    tags = [t for k, v in sorted(metadata.items()) if not k.startswith("_") and (t := tag(k, v))]
    return output, tags


def _test_identity(test: dict[str, Any]) -> dict[str, Any]:
    """What makes a test case the same test: its description, vars and assertions."""
    return {k: test[k] for k in ("description", "vars", "assert") if test.get(k) is not None}
