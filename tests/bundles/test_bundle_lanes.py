"""The Python verifier's fast lanes (app/bundles/case_lane.py, example_lane.py) against the
careful path they stand in for: the same outcome, failure for failure, on every conformance
bundle and on edits aimed at what the lanes judge; and the lanes do take well-formed runs."""

from __future__ import annotations

import gzip
import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

from app.bundles import case_lane, example_lane
from app.bundles.results import NotABundle
from app.bundles.verify import verify_file
from tests.bundle_helpers import REPO
from tests.bundles.edits import canonical, reseal

CASES = sorted(p.parent for p in (REPO / "tests" / "bundles").glob("*/expected.json"))
RICH = REPO / "tests" / "bundles" / "rich_pass" / "bundle.jsonl.gz"
REDACTED = REPO / "tests" / "bundles" / "redacted_pass" / "bundle.jsonl.gz"
DIGEST = "sha256:" + "ab" * 32


def outcome(path: Path, careful: bool, replay: bool = False) -> Any:
    """Everything a verification says, comparable."""
    try:
        result = verify_file(path, careful=careful, replay=replay)
    except NotABundle as exc:
        return ("not a bundle", str(exc))
    return (
        [(f.line, f.code, f.what, f.expected, f.actual) for f in result.failures],
        dict(result.proven),
        dict(result.not_proven),
        result.lines,
    )


def assert_same(path: Path) -> None:
    for replay in (False, True):
        assert outcome(path, careful=False, replay=replay) == outcome(
            path, careful=True, replay=replay
        )


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_the_lanes_agree_with_the_careful_path_on_the_conformance_set(case: Path) -> None:
    assert_same(case / "bundle.jsonl.gz")


def test_the_lanes_take_every_run_of_a_well_formed_bundle(monkeypatch: pytest.MonkeyPatch) -> None:
    taken: dict[str, list[bool]] = {"case": [], "example": []}
    for name, module in (("case", case_lane), ("example", example_lane)):

        def spy(*args: Any, _accept: Callable[..., Any] = module.accept, _name: str = name) -> Any:
            accepted = _accept(*args)
            # A lane declines a run with None; it takes one with its findings (maybe none).
            taken[_name].append(accepted is not None)
            return accepted

        monkeypatch.setattr(module, "accept", spy)
    for bundle in (RICH, REDACTED):
        result = verify_file(bundle)
        assert result.ok, result.failures
    # rich_pass: one run of examples, three checks' cases and one check's baseline cases.
    assert taken["example"] and all(taken["example"])
    assert len(taken["case"]) >= 5 and all(taken["case"])


def _lines(bundle: Path) -> list[bytes]:
    return gzip.decompress(bundle.read_bytes()).splitlines()


def _first(lines: list[bytes], kind: str, skip: int = 0) -> int:
    found = [i for i, line in enumerate(lines) if orjson.loads(line)["kind"] == kind]
    return found[skip]


def _text(
    old: bytes, new: bytes, kind: str = "case", skip: int = 2
) -> Callable[[list[bytes]], None]:
    def change(lines: list[bytes]) -> None:
        at = _first(lines, kind, skip)
        assert old in lines[at], (old, lines[at][:200])
        lines[at] = lines[at].replace(old, new, 1)

    return change


def _value(
    fn: Callable[[dict[str, Any]], None], kind: str = "case", skip: int = 2
) -> Callable[[list[bytes]], None]:
    def change(lines: list[bytes]) -> None:
        at = _first(lines, kind, skip)
        value = orjson.loads(lines[at])
        fn(value)
        try:
            lines[at] = canonical(value)
        except ValueError:  # rfc8785 refuses integers beyond 2^53; orjson writes them
            lines[at] = orjson.dumps(value, option=orjson.OPT_SORT_KEYS)

    return change


def _swap(kind: str, skip: int) -> Callable[[list[bytes]], None]:
    def change(lines: list[bytes]) -> None:
        at = _first(lines, kind, skip)
        lines[at], lines[at + 1] = lines[at + 1], lines[at]

    return change


def _duplicate(kind: str, skip: int) -> Callable[[list[bytes]], None]:
    def change(lines: list[bytes]) -> None:
        at = _first(lines, kind, skip)
        lines.insert(at, lines[at])

    return change


def _set(**fields: Any) -> Callable[[dict[str, Any]], None]:
    return lambda value: value.update(fields)


def _true(**fields: Any) -> Callable[[dict[str, Any]], None]:
    """Set fields and keep the output's or body's digest true to it (the run may then be
    taken by a lane, and the edit is found later, by the cases tree or the dataset digest)."""

    def change(value: dict[str, Any]) -> None:
        value.update(fields)
        name, digest = (
            ("output", "output_digest") if "check_id" in value else ("body", "body_digest")
        )
        value[digest] = "sha256:" + hashlib.sha256(canonical(value[name])).hexdigest()

    return change


def _drop(name: str) -> Callable[[dict[str, Any]], None]:
    return lambda value: value.pop(name)


def _nested(depth: int) -> Any:
    value: Any = "x"
    for _ in range(depth):
        value = [value]
    return value


EDITS: dict[str, Callable[[list[bytes]], None]] = {
    "score written 1.0": _text(b'"score":0.6000000000000001,', b'"score":1.0,', skip=24),
    "score with a trailing zero": _text(
        b'"score":0.6000000000000001,', b'"score":0.60000000000000010,', skip=24
    ),
    "score exponent written long": _text(b'"score":0.6000000000000001,', b'"score":6E-1,', skip=24),
    "score in exponent form": _value(_set(score=1e-7)),
    "score 1e21": _value(_set(score=1e21)),
    "score true": _value(_set(score=True)),
    "score a string": _value(_set(score="1")),
    "score 2^53": _value(_set(score=2**53)),
    "repeat 1.0": _text(b'"repeat":0,', b'"repeat":0.0,'),
    "repeat negative": _value(_set(repeat=-1)),
    "repeat 2^53 + 1": _value(_set(repeat=2**53 + 1)),
    "status unknown": _value(_set(status="passed")),
    # Values that cannot be hashed into a set where a string belongs.
    "status a list": _value(_set(status=["pass"])),
    "kind an object": _value(_set(kind={"case": 1})),
    "check_id a list": _value(_set(check_id=["accuracy"])),
    "assurance an object": _value(_set(assurance={})),
    "scorer_digest a list": _value(_set(scorer_digest=[DIGEST])),
    "example_id a list": _value(_set(example_id=["e02"])),
    "example dataset a list": _value(_set(dataset=[DIGEST]), "example", 6),
    "example id a list": _value(_set(id=["e"]), "example", 6),
    "example tags an object": _value(_set(tags={"t": 1}), "example", 6),
    "assurance unknown": _value(_set(assurance="vouched")),
    "unknown field": _value(_set(extra=1)),
    "check_id of another check": _value(_set(check_id="no_harm")),
    "output digest wrong": _value(_set(output_digest=DIGEST)),
    "output digest uppercase": _value(lambda v: v.update(output_digest=v["output_digest"].upper())),
    "output dropped": _value(_drop("output")),
    "output a non-ASCII string": _value(_set(output="héllo ✓ \u2028")),
    "output with a BOM inside": _value(_set(output="\ufeffhello")),
    "output with a long number": _value(_set(output={"n": 9007199254740993})),
    "output with a 16-digit text": _value(_set(output="1234567890123456")),
    "output with an astral key order": _value(_set(output={"\ue000": 1, "\U0001f600": 2})),
    "output nested 99 deep": _value(_set(output=_nested(99))),
    "output nested 150 deep": _value(_set(output=_nested(150))),
    "output nested 300 deep": _value(_set(output=_nested(300))),
    "example body nested 300 deep": _value(_set(body=_nested(300)), "example", 6),
    "output with an integral float": _text(b'"shift":0.05', b'"shift":1.0'),
    "output with a lone surrogate escape": _text(b'"answer":"a2"', b'"answer":"\\ud800"'),
    "output with an escaped quote": _text(b'"answer":"a2"', b'"answer":"\\"output\\":"'),
    "true non-ASCII output": _value(_true(output="héllo ✓ \u2028 \U0001f600")),
    "true output with a BOM inside": _value(_true(output="\ufeffhello")),
    "true output with astral keys": _value(_true(output={"\ue000": 1, "\U0001f600": 2})),
    "true output nested 99 deep": _value(_true(output=_nested(99))),
    "true output with floats": _value(_true(output={"a": [0.1, 1e-7, 1e21, -0.0]})),
    "true output a number": _value(_true(output=12)),
    "true output with control characters": _value(_true(output='a\u0000\u001f"\\/')),
    "true example body non-ASCII": _value(_true(body={"q": "ü\u2029"}), "example", 6),
    "true example body with a float": _value(_true(body={"q": 2.5}), "example", 6),
    "evidence ref malformed": _value(_set(evidence_refs=["sha256:zz"])),
    "evidence refs not a list": _value(_set(evidence_refs=DIGEST)),
    "trace_ref null": _value(_set(trace_ref=None)),
    "trace_ref valid": _value(_set(trace_ref={"digest": DIGEST, "id": "t1"})),
    "trace_ref with an extra key": _value(_set(trace_ref={"digest": DIGEST, "id": "t", "x": 1})),
    "scorer_digest malformed": _value(_set(scorer_digest="sha256:1")),
    "example_id a number": _value(_set(example_id=7)),
    "keys out of order": _text(
        b'{"assurance":"platform_verified","check_id":"accuracy"',
        b'{"check_id":"accuracy","assurance":"platform_verified"',
    ),
    "duplicate key": _text(b'"status":', b'"status":"fail","status":'),
    "whitespace": _text(b'"repeat":0,', b'"repeat": 0,'),
    "cases swapped": _swap("case", 3),
    "case duplicated": _duplicate("case", 3),
    "baseline case swapped": _swap("baseline_case", 3),
    "case after the baseline": lambda lines: lines.insert(
        _first(lines, "baseline_case", 4), lines[_first(lines, "case", 4)]
    ),
    "invalid UTF-8": _text(b'"answer":"a2"', b'"answer":"\xff"'),
    "examples swapped": _swap("example", 5),
    "example duplicated": _duplicate("example", 5),
    "example body dropped": _value(_drop("body"), "example", 6),
    "example body with a float": _value(_set(body={"q": 1.5}), "example", 6),
    "example body digest wrong": _value(_set(body_digest=DIGEST), "example", 6),
    "example tags with a number": _value(_set(tags=["t", 1]), "example", 6),
    "example of another dataset": _value(_set(dataset=DIGEST), "example", 6),
    "example id non-ASCII": _value(_set(id="é"), "example", 6),
    "example with an unknown field": _value(_set(extra=None), "example", 6),
}


@pytest.mark.parametrize("name", list(EDITS))
def test_edits_of_case_and_example_lines_get_the_careful_outcome(name: str, tmp_path: Path) -> None:
    lines = _lines(RICH)
    EDITS[name](lines)
    path = tmp_path / "edited.jsonl.gz"
    path.write_bytes(gzip.compress(b"".join(line + b"\n" for line in reseal(lines)), mtime=0))
    assert_same(path)
    assert outcome(path, careful=True) != outcome(RICH, careful=True)


def test_bodies_in_a_redacted_export_get_the_careful_outcome(tmp_path: Path) -> None:
    """Outputs and example bodies where the exporter could not read them."""
    lines = _lines(REDACTED)
    case = _first(lines, "case")
    value = orjson.loads(lines[case])
    value["output"] = "x"
    lines[case] = canonical(value)
    example = _first(lines, "example")
    value = orjson.loads(lines[example])
    value["body"] = {"q": "x"}
    lines[example] = canonical(value)
    path = tmp_path / "bodies.jsonl.gz"
    path.write_bytes(gzip.compress(b"".join(line + b"\n" for line in reseal(lines)), mtime=0))
    assert_same(path)
    codes = {failure[1] for failure in outcome(path, careful=False)[0]}
    assert "body_without_permission" in codes
