"""Random resealed mutations of a rich bundle: both verifiers refuse every one that changes what
the bundle says, and they always agree (exit status and every failure's line and code).

Each run draws new mutations (the seed is printed on failure; EVALBOOK_FUZZ_SEED replays one).
The verifiers run as a forger's victim would: with the service's keys trusted and
--require-trust, so that dropping the signature is a refused downgrade too.
"""

from __future__ import annotations

import gzip
import json
import os
import random
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import rfc8785

from app.bundles.results import NotABundle
from app.bundles.signature import parse_keys_document
from app.bundles.verify import verify_file
from tests.bundle_helpers import REPO, node_verify_many
from tests.bundles import edits
from tests.bundles.edits import reseal

MUTATIONS = 520
RICH = REPO / "tests" / "bundles" / "rich_pass" / "bundle.jsonl.gz"
KEYS = REPO / "tests" / "bundles" / "keys.json"
Path_ = tuple[Any, ...]


def descriptive(line_kind: str, path: Path_) -> bool:
    """Fields a bundle carries to describe, not to prove (docs/bundles.md): who exported it and
    when, the producer's versions, the live envelope, the header's copy of the keys (the
    trusted keys are given), a trace's id, and the bounds of the cases a limit left out."""
    head = path[0] if path else None
    if line_kind == "header":
        return head in ("created_at", "exporter", "producer", "keys")
    if line_kind == "report":
        return head == "envelope"
    if line_kind in ("case", "baseline_case"):
        return path[:2] == ("trace_ref", "id")
    if line_kind == "scorer_version":
        # Declared with the scorer, outside the digest the suite pins (only --replay reads it).
        return head == "score_range"
    if line_kind in ("unavailable", "redacted"):
        # The bounds of the cases a limit left out; where an output too large to carry is kept
        # (the verifiers check only that the key names the output's digest).
        return len(path) >= 3 and path[2] in ("first", "last", "object_key")
    return False


def leaf_paths(value: Any, prefix: Path_ = ()) -> Iterator[tuple[Path_, Any]]:
    """Every (path, value) within `value`, itself first (path ())."""
    yield prefix, value
    if isinstance(value, dict):
        for key, item in value.items():
            yield from leaf_paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from leaf_paths(item, (*prefix, index))


def _at(value: Any, path: Path_) -> Any:
    for step in path:
        value = value[step]
    return value


def _changed_scalar(rng: random.Random, value: Any) -> Any:
    if isinstance(value, bool):
        return not value
    if value is None:
        return rng.choice([0, "x", False])
    if isinstance(value, int):
        return value + rng.choice([-1, 1, 2, 1000])
    if isinstance(value, float):
        return rng.choice([value * 1.5 + 0.1, -value - 0.25, 0.0 if value else 1.0])
    if isinstance(value, str):
        if not value:
            return "x"
        at = rng.randrange(len(value))
        replacement = "0" if value[at] != "0" else "1"
        return value[:at] + replacement + value[at + 1 :]
    return None


def mutate(rng: random.Random, lines: list[bytes]) -> tuple[str, bytes, bool]:
    """(what was done, the bundle file's bytes, whether it changes what the bundle says)."""
    values = [orjson.loads(line) for line in lines]
    op = rng.choice(
        ["scalar", "scalar", "scalar", "delete", "add", "drop", "dup", "swap", "byte", "gzip"]
    )
    at = rng.randrange(len(lines))
    kind = values[at]["kind"]
    out = list(lines)
    meaning = True
    other = at
    if op in ("scalar", "delete", "add"):
        value = values[at]
        candidates = [
            (path, item)
            for path, item in leaf_paths(value)
            if path != ("kind",)
            and (
                (op == "scalar" and not isinstance(item, dict | list))
                or (op == "delete" and path and isinstance(item, dict | list | str | int | float))
                or (op == "add" and isinstance(item, dict))
            )
        ]
        if not candidates:
            return mutate(rng, lines)
        path, item = rng.choice(candidates)
        if op == "scalar":
            _at(value, path[:-1])[path[-1]] = _changed_scalar(rng, item)
        elif op == "delete":
            parent = _at(value, path[:-1])
            del parent[path[-1]]
        else:
            item[f"extra_{rng.randrange(100)}"] = rng.choice([1, "x", None, [], {}])
        meaning = not descriptive(kind, path)
        out[at] = rfc8785.dumps(value)
        what = f"{op} {kind}@{at + 1} {'/'.join(map(str, path))}"
    elif op == "drop":
        del out[at]
        what = f"drop line {at + 1} ({kind})"
    elif op == "dup":
        out.insert(at, out[at])
        what = f"duplicate line {at + 1} ({kind})"
    elif op == "swap":
        other = at + 1 if at + 1 < len(out) else at - 1
        if values[other]["kind"] == kind == "scorer_version" or out[at] == out[other]:
            return mutate(rng, lines)
        out[at], out[other] = out[other], out[at]
        what = f"swap lines {at + 1} and {other + 1}"
    elif op == "byte":
        data = bytearray(out[at])
        index = rng.randrange(len(data))
        data[index] = rng.choice([b for b in b'0a"{}[],:\\ \xff' if b != data[index]])
        out[at] = bytes(data)
        what = f"byte {index} of line {at + 1} ({kind})"
        meaning = _byte_edit_means(kind, values[at], out[at])
    else:
        data = bytearray(gzip.compress(b"".join(line + b"\n" for line in lines), mtime=0))
        index = rng.randrange(len(data))
        data[index] ^= 1 << rng.randrange(8)
        # MTIME, XFL and OS of the gzip header describe the file, not its lines; a flipped bit
        # the inflater never reads (padding, an unused code length) leaves the lines as they were.
        return f"gzip byte {index}", bytes(data), not (4 <= index <= 9 or _same(data, lines))
    # Resealing re-appends the trailer: an edit of the trailer itself is left as made.
    touches_trailer = kind == "trailer" or (op == "swap" and values[other]["kind"] == "trailer")
    sealed = out if touches_trailer else reseal(out)
    return what, gzip.compress(b"".join(line + b"\n" for line in sealed), mtime=0), meaning


def _same(data: bytearray, lines: list[bytes]) -> bool:
    try:
        return gzip.decompress(bytes(data)) == b"".join(line + b"\n" for line in lines)
    except (OSError, EOFError, zlib.error):
        return False


def _differences(before: Any, after: Any, path: Path_ = ()) -> Iterator[Path_]:
    if isinstance(before, dict) and isinstance(after, dict):
        for key in before.keys() | after.keys():
            if key not in before or key not in after:
                yield (*path, key)
            else:
                yield from _differences(before[key], after[key], (*path, key))
    elif isinstance(before, list) and isinstance(after, list) and len(before) == len(after):
        for index, (b, a) in enumerate(zip(before, after, strict=True)):
            yield from _differences(b, a, (*path, index))
    elif before != after or type(before) is not type(after):
        yield path


def _byte_edit_means(kind: str, before: dict[str, Any], data: bytes) -> bool:
    """Whether a byte edit changes what the line says: anything but a canonical line that
    differs only in descriptive fields."""
    try:
        after = orjson.loads(data)
    except orjson.JSONDecodeError:
        return True
    if not isinstance(after, dict) or after.get("kind") != kind:
        return True
    try:
        if rfc8785.dumps(after) != data:
            return True
    except Exception:
        return True
    return not all(descriptive(kind, path) for path in _differences(before, after))


def _python(path: Path, keys: dict[str, bytes]) -> tuple[int, list[tuple[int, str]]]:
    """The Python verifier's exit status and failures, after holding its fast lanes to the
    careful path (app/bundles/case_lane.py): the same failures, in full, and proofs."""
    results = []
    for careful in (False, True):
        try:
            outcome = verify_file(path, trusted_keys=keys, require_trust=True, careful=careful)
        except NotABundle as exc:
            results.append(str(exc))
            continue
        results.append(
            (
                [(f.line, f.code, f.what, f.expected, f.actual) for f in outcome.failures],
                dict(outcome.proven),
                dict(outcome.not_proven),
            )
        )
    assert results[0] == results[1], path
    if isinstance(results[0], str):
        return 2, []
    failures = results[0][0]
    return (0 if not failures else 1), sorted((line, code) for line, code, *_ in failures)


def test_resealed_mutations_are_refused_by_both_verifiers(tmp_path: Path) -> None:
    seed = int(os.environ.get("EVALBOOK_FUZZ_SEED") or random.SystemRandom().randrange(2**32))
    # Shown with the test's output when it fails, whatever fails: EVALBOOK_FUZZ_SEED replays it.
    print(f"EVALBOOK_FUZZ_SEED={seed}")
    rng = random.Random(seed)
    lines = gzip.decompress(RICH.read_bytes()).splitlines()
    keys = parse_keys_document(KEYS)
    made = []
    for number in range(MUTATIONS):
        what, data, meaning = mutate(rng, lines)
        path = tmp_path / f"{number:04d}.jsonl.gz"
        path.write_bytes(data)
        made.append((path, what, meaning))
    trusted = json.loads(KEYS.read_text())["keys"][0]["public_key"]
    node = node_verify_many([p for p, _, _ in made], trusted_key=trusted)
    refused = 0
    for (path, what, meaning), node_result in zip(made, node, strict=True):
        python_exit, python_failures = _python(path, keys)
        context = f"seed {seed}, {path.name}: {what}"
        assert node_result["exit"] == python_exit, (context, python_failures, node_result)
        if python_exit != 2:
            node_failures = sorted(
                (f["line"], f["code"]) for f in node_result["document"]["failures"]
            )
            assert node_failures == python_failures, context
        if meaning:
            assert python_exit != 0, f"accepted: {context}"
        refused += python_exit != 0
    assert refused >= MUTATIONS * 0.9


def _systematic(lines: list[bytes]) -> Iterator[tuple[str, list[bytes]]]:
    """Every line kind's first line dropped, duplicated, and moved before the trailer."""
    kinds: dict[str, int] = {}
    for index, line in enumerate(lines):
        kinds.setdefault(orjson.loads(line)["kind"], index)
    for kind, index in kinds.items():
        dropped = lines[:index] + lines[index + 1 :]
        doubled = lines[: index + 1] + lines[index:]
        moved = [*dropped[:-1], lines[index], dropped[-1]] if kind != "trailer" else None
        yield f"drop {kind}", dropped
        yield f"duplicate {kind}", doubled
        if moved is not None and moved != lines:
            yield f"move {kind} to the end", moved


def test_every_line_kind_dropped_duplicated_or_moved(tmp_path: Path) -> None:
    """Deterministic companions of the random mutations: each is refused by both verifiers,
    with the same failures (resealed unless the trailer itself is the edit)."""
    lines = gzip.decompress(RICH.read_bytes()).splitlines()
    keys = parse_keys_document(KEYS)
    made = []
    for number, (what, edited) in enumerate(_systematic(lines)):
        sealed = edited if what.endswith("trailer") else reseal(edited)
        path = tmp_path / f"{number:03d}.jsonl.gz"
        path.write_bytes(gzip.compress(b"".join(line + b"\n" for line in sealed), mtime=0))
        made.append((path, what))
    trusted = json.loads(KEYS.read_text())["keys"][0]["public_key"]
    node = node_verify_many([p for p, _ in made], trusted_key=trusted)
    assert len(made) >= 30
    for (path, what), node_result in zip(made, node, strict=True):
        python_exit, python_failures = _python(path, keys)
        assert python_exit != 0, f"accepted: {what}"
        assert node_result["exit"] == python_exit, what
        if python_exit == 1:
            node_failures = sorted(
                (f["line"], f["code"]) for f in node_result["document"]["failures"]
            )
            assert node_failures == python_failures, what


def _manifest_edit(lines: list[bytes], change: Any, spaced: bool = False) -> list[bytes]:
    """The rich bundle with its check line that carries a manifest changed, resealed."""
    at = next(
        i
        for i, line in enumerate(lines)
        if line.startswith(b'{"check_id"') and b'"manifest":' in line
    )
    value = orjson.loads(lines[at])
    change(value)
    edited = list(lines)
    edited[at] = json.dumps(value, sort_keys=True).encode() if spaced else rfc8785.dumps(value)
    return reseal(edited)


def test_check_lines_whose_manifest_is_not_hashed_from_the_line(tmp_path: Path) -> None:
    """The Node verifier hashes a manifest from its line's bytes only when `result` follows it
    there; otherwise it writes the manifest again. Both verifiers agree on an unknown field
    between the two (the manifest still proven), an object with a `result` key inside the
    manifest, and a line written with spaces."""
    lines = gzip.decompress(RICH.read_bytes()).splitlines()
    keys = parse_keys_document(KEYS)

    def note(value: dict[str, Any]) -> None:
        value["note"] = {"a": 1, "result": 2}

    def nested(value: dict[str, Any]) -> None:
        value["manifest"] = [*value["manifest"], {"a": 1, "result": 2}]

    cases = {
        "note": (_manifest_edit(lines, note), {"unknown_field"}),
        "nested": (_manifest_edit(lines, nested), {"manifest"}),
        "spaced": (_manifest_edit(lines, lambda _: None, spaced=True), {"not_canonical"}),
    }
    paths = []
    for name, (edited, _) in cases.items():
        path = tmp_path / f"{name}.jsonl.gz"
        path.write_bytes(gzip.compress(b"".join(line + b"\n" for line in edited), mtime=0))
        paths.append(path)
    trusted = json.loads(KEYS.read_text())["keys"][0]["public_key"]
    node = node_verify_many(paths, trusted_key=trusted)
    for path, (name, (_, codes)), node_result in zip(paths, cases.items(), node, strict=True):
        python_exit, python_failures = _python(path, keys)
        node_failures = sorted((f["line"], f["code"]) for f in node_result["document"]["failures"])
        assert (node_result["exit"], node_failures) == (python_exit, python_failures), name
        assert {code for _, code in python_failures} == codes, (name, python_failures)
        assert node_result["document"]["proven"].get("manifest", 0) == (name != "nested"), name


def _suite_edit(lines: list[bytes], change: Any) -> list[bytes]:
    """The rich bundle with its suite_version line's content changed, resealed."""
    suite = edits.kind("suite_version")
    return reseal(edits.edit(lines, suite, lambda value: change(value["content"])))


def test_suite_contents_not_as_written_are_refused_not_crashed_on(tmp_path: Path) -> None:
    """A suite whose checks are not as the service writes them (a check without its scorer, one
    draw of the fuzz above, and its kin) is refused by both verifiers with the same failures,
    as malformed or by its digest, and neither verifier stops reading."""
    lines = gzip.decompress(RICH.read_bytes()).splitlines()
    keys = parse_keys_document(KEYS)
    suite = orjson.loads(lines[edits.index_of(lines, edits.kind("suite_version"))])
    first_scorer = next(c for c in suite["content"]["checks"] if "measure" not in c)["scorer"]

    def without(field: str) -> Any:
        return lambda content: next(c for c in content["checks"] if "measure" not in c).pop(field)

    def scorer_as(value: Any) -> Any:
        def change(content: dict[str, Any]) -> None:
            next(c for c in content["checks"] if "measure" not in c)["scorer"] = value

        return change

    cases = {
        "no scorer": without("scorer"),
        "scorer is text": scorer_as("exact_match"),
        "scorer is null": scorer_as(None),
        "scorer without a version": scorer_as({"name": first_scorer["name"], "digest": "x"}),
        "scorer's name is a number": scorer_as({**first_scorer, "name": 7}),
        "checks is an object": lambda content: content.update(checks={"a": 1}),
        "checks is a number": lambda content: content.update(checks=3),
        "a check is text": lambda content: content["checks"].insert(0, "scorer"),
    }
    paths = []
    for number, change in enumerate(cases.values()):
        path = tmp_path / f"{number:02d}.jsonl.gz"
        edited = _suite_edit(lines, change)
        path.write_bytes(gzip.compress(b"".join(line + b"\n" for line in edited), mtime=0))
        paths.append(path)
    trusted = json.loads(KEYS.read_text())["keys"][0]["public_key"]
    node = node_verify_many(paths, trusted_key=trusted)
    for path, name, node_result in zip(paths, cases, node, strict=True):
        python_exit, python_failures = _python(path, keys)
        assert python_exit == 1, (name, python_failures)
        assert node_result["exit"] == 1, (name, node_result)
        node_failures = sorted((f["line"], f["code"]) for f in node_result["document"]["failures"])
        assert node_failures == python_failures, name
        codes = {code for _, code in python_failures}
        assert codes & {"malformed", "suite_digest"}, (name, python_failures)
        if name == "no scorer":
            # The shape admits it (a measure check has no scorer): only the digest refuses it.
            assert "suite_digest" in codes, python_failures
