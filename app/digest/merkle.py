"""RFC 6962 Merkle trees over case records: leaves, roots, audit paths, consistency proofs.

Pure (no I/O; SHA-256 by app.digest.sha256): the service, the aggregation engine and the bundle
verifier share it.
A tree of n leaves is kept as its levels: level 0 is the leaf hashes, and each next level
hashes pairs left to right, carrying an unpaired last node up unchanged. That is the RFC 6962
tree (split at the largest power of two below n): the node at (level l, index j) is the hash
of leaves [j * 2^l, min((j + 1) * 2^l, n)).
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import orjson

from app.digest.canonical import es_number
from app.digest.sha256 import LANE_BATCH, node_digests, short_digest, short_digests

EMPTY_ROOT = hashlib.sha256(b"").digest()
_LEAF = b"\x00"
_NODE = b"\x01"
_DUMPS = orjson.dumps


# The leaf input (0x00, then case_record's bytes) with each field's text put in, for the hot
# paths that hash many cases from columns: assurance, status and scorer digest go in as they
# are (fixed vocabularies or checked digests), the others as their JSON text.
LEAF_INPUT = (
    '\x00{"assurance":"%s","evidence_refs":%s,"example_id":%s,"output_digest":%s,"repeat":%d,'
    '"score":%s,"scorer_digest":"%s","status":"%s","trace_digest":%s}'
)


# LEAF_INPUT's literal pieces, around its nine fields.
LEAF_PARTS = tuple(LEAF_INPUT.replace("%d", "%s").split("%s"))


def measures_text(measures: Mapping[str, float] | None) -> str | None:
    """A case's measures as their canonical JSON (RFC 8785: names are identifiers, so byte
    order is the standard's order; numbers in the ECMAScript form), or None when it has none:
    a case without measures commits to the record it always did."""
    if not measures:
        return None
    return (
        "{"
        + ",".join(f'"{name}":{es_number(float(measures[name]))}' for name in sorted(measures))
        + "}"
    )


def with_measures(example_id_json: str, measures: str | None) -> str:
    """The example id's JSON text followed by the measures member, which sorts right after it
    in a case record (so the column hashers put it in the example id's gap)."""
    return example_id_json if measures is None else f'{example_id_json},"measures":{measures}'


def joined_leaf_hashes(parts: Sequence[str], fields: Sequence[list[str]]) -> list[bytes]:
    """The leaf hashes of cases given as columns: case i's leaf input is parts[0], fields[0][i],
    parts[1], ... parts[-1] (one column per gap, each entry already the text that goes in). A
    column with one value in all cases joins the literal text around it, so each case joins
    only what varies (a join of a few pieces costs a quarter of formatting a template with %)."""
    count = len(fields[0]) if fields else 0
    pieces: list[Iterable[str]] = []
    literal = parts[0]
    for field, after in zip(fields, parts[1:], strict=True):
        # A column whose last value differs from its first is not scanned for it.
        if field and field[-1] == field[0] and field.count(field[0]) == len(field):
            literal += field[0] + after
        else:
            pieces += [itertools.repeat(literal), field]
            literal = after
    if not pieces:
        return [short_digest(literal.encode())] * count
    pieces.append(itertools.repeat(literal))
    # zip stops with the varying columns, which all have a value per case.
    return short_digests(list(map(str.encode, map("".join, zip(*pieces, strict=False)))))


def column_leaf_hashes(
    example_ids: Sequence[str],
    repeats: Sequence[int],
    statuses: list[str],
    scores: Sequence[float | None],
    output_digests: Sequence[str | None],
    trace_digests: Sequence[str | None],
    evidence_refs: Sequence[Sequence[str] | None],
    assurances: list[str],
    scorer_digests: list[str],
    measures: Sequence[str | None] | None = None,
) -> list[bytes]:
    """The leaf hashes of cases given field by field (a bundle's case lines, stored rows): the
    same as `leaf_hash(case_record(...))` of each, written through LEAF_INPUT's columns.
    Statuses, assurances and scorer digests go in as they are (checked vocabularies and
    digests); `measures`, each case's `measures_text`, when any case has some."""
    ids = json_strings(example_ids)
    if measures is not None:
        ids = list(map(with_measures, ids, measures))
    score_text = {v: "null" if v is None else es_number(float(v)) for v in set(scores)}
    fields = [
        assurances,
        ["[]" if not r else _DUMPS(list(r)).decode() for r in evidence_refs],
        ids,
        ["null" if d is None else '"' + d + '"' for d in output_digests],
        list(map(str, repeats)),
        [score_text[v] for v in scores],
        scorer_digests,
        statuses,
        ["null" if t is None else '"' + t + '"' for t in trace_digests],
    ]
    return joined_leaf_hashes(LEAF_PARTS, fields)


def json_strings(texts: Sequence[str]) -> list[str]:
    """Each text as its JSON string (RFC 8785's form), quoted by hand when the column is plain."""
    if plain("".join(texts)):
        return ['"' + text + '"' for text in texts]
    return [_DUMPS(text).decode() for text in texts]


def plain(text: str) -> bool:
    """Whether JSON writes `text` as it is between quotes (no quote, backslash or control)."""
    return '"' not in text and "\\" not in text and text.isprintable()


def leaf_hash(record: bytes) -> bytes:
    """SHA-256(0x00 || record)."""
    return short_digest(_LEAF + record)


def node_hash(left: bytes, right: bytes) -> bytes:
    """SHA-256(0x01 || left || right)."""
    return short_digest(_NODE + left + right)


def case_record(
    example_id: str,
    repeat: int,
    status: str,
    score: float | None,
    output_digest: str | None,
    trace_digest: str | None,
    evidence_refs: Sequence[str] | None,
    assurance: str,
    scorer_digest: str,
    measures: str | None = None,
) -> bytes:
    """A case record: the canonical JSON (RFC 8785) of the fields a case commits to, with
    `measures` (their `measures_text`) only when the case carries some.

    Written key by key in canonical order (this runs once per ingested case); orjson writes
    strings as RFC 8785 does and the score goes through the ECMAScript number form.
    """
    return b"".join(
        (
            b'{"assurance":',
            _DUMPS(assurance),
            b',"evidence_refs":',
            _DUMPS(list(evidence_refs or ())),
            b',"example_id":',
            _DUMPS(example_id),
            b"" if measures is None else b',"measures":' + measures.encode(),
            b',"output_digest":',
            _DUMPS(output_digest),
            b',"repeat":',
            str(repeat).encode(),
            b',"score":',
            b"null" if score is None else es_number(score).encode(),
            b',"scorer_digest":',
            _DUMPS(scorer_digest),
            b',"status":',
            _DUMPS(status),
            b',"trace_digest":',
            _DUMPS(trace_digest),
            b"}",
        )
    )


def stored_case_record(
    example_id: str, repeat: int, row: Mapping[str, Any], scorer_digest: str
) -> bytes:
    """The case record of a stored case row (its columns named as in the `cases` table)."""
    return case_record(
        example_id,
        repeat,
        row["status"],
        row["score"],
        row["output_digest"],
        row["trace_digest"],
        row["evidence_refs"],
        row["assurance"],
        scorer_digest,
        row.get("measures"),
    )


def case_leaf(case: Mapping[str, Any], scorer_digest: str) -> bytes:
    """The leaf of a case given as a mapping (an API case, a bundle line): `trace_ref`'s digest,
    a missing score, output digest or evidence list as null or empty."""
    trace = case.get("trace_ref")
    score = case.get("score")
    return leaf_hash(
        case_record(
            case["example_id"],
            int(case["repeat"]),
            case["status"],
            None if score is None else float(score),
            case.get("output_digest"),
            None if trace is None else trace["digest"],
            case.get("evidence_refs"),
            case["assurance"],
            scorer_digest,
            measures_text(case.get("measures")),
        )
    )


def split_leaves(leaves: bytes) -> list[bytes]:
    """Concatenated 32-byte leaf hashes as a list."""
    if len(leaves) % 32:
        raise ValueError("leaf hashes come in 32-byte units")
    return [leaves[i : i + 32] for i in range(0, len(leaves), 32)]


def _next_level(level: Sequence[bytes]) -> list[bytes]:
    paired = len(level) // 2 * 2
    out = node_digests(_NODE, level[0:paired:2], level[1:paired:2])
    if len(level) % 2:
        out.append(level[-1])
    return out


def root_of_joined(leaves: bytes) -> bytes:
    """MTH of concatenated 32-byte leaf hashes, without a bytes object per leaf: the first
    level hashes pairs straight from the buffer."""
    if len(leaves) % 32:
        raise ValueError("leaf hashes come in 32-byte units")
    count = len(leaves) // 32
    if count <= 2:
        return root(split_leaves(leaves))
    level: list[bytes] = []
    # A batch of pairs at a time: a tree of millions of leaves never holds all its node inputs.
    paired = 64 * (count // 2)
    for start in range(0, paired, 64 * LANE_BATCH):
        offsets = range(start, min(start + 64 * LANE_BATCH, paired), 64)
        level += short_digests([_NODE + leaves[offset : offset + 64] for offset in offsets])
    if count % 2:
        level.append(leaves[-32:])
    return root(level)


def levels(leaf_hashes: Sequence[bytes]) -> list[list[bytes]]:
    """Every level of the tree, leaves first, root last (one empty level for no leaves)."""
    out = [list(leaf_hashes)]
    while len(out[-1]) > 1:
        out.append(_next_level(out[-1]))
    return out


def root(leaf_hashes: Sequence[bytes]) -> bytes:
    """The tree head, MTH(D[n]); SHA-256 of nothing for the empty tree."""
    if not leaf_hashes:
        return EMPTY_ROOT
    level: Sequence[bytes] = leaf_hashes
    while len(level) > 1:
        level = _next_level(level)
    return level[0]


def audit_path(tree: Sequence[Sequence[bytes]], index: int) -> list[bytes]:
    """PATH(index, D[n]) of RFC 6962 section 2.1.1, nearest the leaf first."""
    size = len(tree[0])
    if not 0 <= index < size:
        raise IndexError(f"leaf {index} of a tree of {size}")
    path: list[bytes] = []
    for level in tree[:-1]:
        sibling = index ^ 1
        if sibling < len(level):
            path.append(level[sibling])
        index >>= 1
    return path


def _node(tree: Sequence[Sequence[bytes]], start: int, end: int) -> bytes:
    """MTH(D[start:end]) for a node of the tree (start aligned to the node's width)."""
    width, level = 1, 0
    while width < end - start:
        width, level = width * 2, level + 1
    return tree[level][start >> level]


def consistency_proof(tree: Sequence[Sequence[bytes]], m: int) -> list[bytes]:
    """PROOF(m, D[n]) of RFC 6962 section 2.1.2 (empty when m is 0 or n)."""
    n = len(tree[0])
    if not 0 <= m <= n:
        raise ValueError(f"a prefix of {m} leaves of a tree of {n}")
    if m in (0, n):
        return []
    proof: list[bytes] = []
    start, end, complete = 0, n, True
    # SUBPROOF(m, D[start:end], complete), unrolled: each step goes left or right.
    while end - start != m - start or not complete:
        size = end - start
        if m - start == size:
            proof.append(_node(tree, start, end))
            break
        k = 1
        while k * 2 < size:
            k *= 2
        if m - start <= k:
            proof.append(_node(tree, start + k, end))
            end = start + k
        else:
            proof.append(_node(tree, start, start + k))
            start, complete = start + k, False
    proof.reverse()
    return proof


def verify_inclusion(
    leaf: bytes, index: int, size: int, path: Sequence[bytes], expected_root: bytes
) -> bool:
    """RFC 9162 section 2.1.3.2: does `path` prove `leaf` at `index` in the tree?"""
    if not 0 <= index < size or any(len(h) != 32 for h in (leaf, expected_root, *path)):
        return False
    fn, sn, node = index, size - 1, leaf
    for sibling in path:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            node = node_hash(sibling, node)
            if not fn & 1:
                while fn & 1 == 0 and fn != 0:
                    fn, sn = fn >> 1, sn >> 1
        else:
            node = node_hash(node, sibling)
        fn, sn = fn >> 1, sn >> 1
    return sn == 0 and node == expected_root


def root_from_consistency(
    old_size: int, old_root: bytes, new_size: int, proof: Sequence[bytes]
) -> bytes | None:
    """RFC 9162 section 2.1.4.2: the new tree's root a consistency proof implies from the old
    tree's, or None when the proof does not hold for the old root."""
    if old_size == 0 or new_size < old_size:
        return None
    if old_size == new_size:
        return old_root if not proof else None
    if not proof or any(len(h) != 32 for h in (old_root, *proof)):
        return None
    path = list(proof)
    if old_size & (old_size - 1) == 0:
        path.insert(0, old_root)
    fn, sn = old_size - 1, new_size - 1
    while fn & 1:
        fn, sn = fn >> 1, sn >> 1
    roots = _consistency_roots(fn, sn, path)
    if roots is None or roots[0] != old_root:
        return None
    return roots[1]


def _consistency_roots(fn: int, sn: int, path: list[bytes]) -> tuple[bytes, bytes] | None:
    """The old and new roots a consistency path implies (RFC 9162 2.1.4.2, steps 5 and 6)."""
    fr = sr = path[0]
    for c in path[1:]:
        if sn == 0:
            return None
        if fn & 1 or fn == sn:
            fr, sr = node_hash(c, fr), node_hash(c, sr)
            if not fn & 1:
                while fn & 1 == 0 and fn != 0:
                    fn, sn = fn >> 1, sn >> 1
        else:
            sr = node_hash(sr, c)
        fn, sn = fn >> 1, sn >> 1
    return (fr, sr) if sn == 0 else None


def hex_digest(value: bytes) -> str:
    """A hash as the report writes it."""
    return "sha256:" + value.hex()


def from_hex_digest(text: str) -> bytes:
    """The 32 bytes of a `sha256:<hex>` string (ValueError when it is not one)."""
    if not text.startswith("sha256:") or len(text) != 71:
        raise ValueError(f"not a sha256 digest: {text!r}")
    return bytes.fromhex(text[7:])


def digests(values: Iterable[bytes]) -> list[str]:
    """Hashes as `sha256:<hex>` strings."""
    return [hex_digest(v) for v in values]
