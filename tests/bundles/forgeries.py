"""The conformance cases of the trust contract: what a forger who reseals would try, and what a
broken tool would write. Each is one edit of the rich (or redacted, or limited) bundle; the
codes are what both verifiers must name (docs/bundles.md, "Strictness")."""

from __future__ import annotations

import base64
import gzip
import hashlib
from collections.abc import Callable
from typing import Any

import orjson
import rfc8785

from tests.bundles.edits import Lines, drop, edit, gz, index_of, kind, reseal

Case = tuple[bytes, int, list[str], str]
OTHER_DIGEST = "sha256:" + "0" * 64


def _set(**fields: Any) -> Callable[[dict[str, Any]], None]:
    return lambda value: value.update(fields)


def _edit(lines: Lines, line_kind: str, change: Callable[[dict[str, Any]], None], **match: Any):
    return edit(lines, kind(line_kind, **match), change)


def _resealed(lines: Lines) -> bytes:
    return gz(reseal(lines))


def _redigest(lines: Lines) -> Lines:
    """Recompute the report's digest in the report line and the header, as a forger who edited
    the body would (the signature still covers the original)."""
    out = list(lines)
    at = index_of(out, kind("report"))
    report = orjson.loads(out[at])
    digest = "sha256:" + hashlib.sha256(rfc8785.dumps(report["body"])).hexdigest()
    report["digest"] = digest
    out[at] = rfc8785.dumps(report)
    header = orjson.loads(out[0])
    header["report_digest"] = digest
    out[0] = rfc8785.dumps(header)
    return out


def _duplicate(lines: Lines, predicate: Callable[[dict[str, Any]], bool]) -> Lines:
    out = list(lines)
    at = index_of(out, predicate)
    out.insert(at + 1, out[at])
    return out


def _swap(lines: Lines, first: int, second: int) -> Lines:
    out = list(lines)
    out[first], out[second] = out[second], out[first]
    return out


def _raw_line(lines: Lines, at: int, data: bytes) -> Lines:
    out = list(lines)
    out[at] = data
    return out


def _case_field(line_kind: str, check: str, example: str, at_repeat: int = 0, **change: Any):
    return lambda lines: _edit(
        lines, line_kind, _set(**change), check_id=check, example_id=example, repeat=at_repeat
    )


def _items(lines: Lines, list_kind: str, change: Callable[[list[dict[str, Any]]], None]) -> Lines:
    return _edit(lines, list_kind, lambda v: change(v["items"]))


def _move_item(lines: Lines) -> Lines:
    """A trace_bodies item moved from `redacted` to `unavailable`."""
    moved: list[dict[str, Any]] = []
    out = _items(lines, "redacted", lambda items: moved.append(items.pop()))
    return _items(out, "unavailable", lambda items: items.append(moved[0]))


def _drop_permission_items(items: list[dict[str, Any]]) -> None:
    items[:] = [item for item in items if item["reason"] != "permission"]


def _flip_signature(value: dict[str, Any]) -> None:
    sig = bytearray(base64.b64decode(value["attestation"]["signatures"][0]["sig"]))
    sig[0] ^= 1
    value["attestation"]["signatures"][0]["sig"] = base64.b64encode(bytes(sig)).decode()


def _gzip_flip(data: bytes, at: int, mask: int) -> bytes:
    out = bytearray(data)
    out[at] ^= mask
    return bytes(out)


def _resealed_body_edit(lines: Lines) -> Lines:
    """The body's result changed, its digest recomputed everywhere, trailer resealed."""
    out = _edit(lines, "report", lambda v: v["body"].update(result="fail"))
    return _redigest(out)


def forgeries(full: Lines, redacted: Lines, limited: Lines) -> dict[str, Case]:
    """name -> (file bytes, exit status, failure codes, what it tests)."""
    full_gz = gz(full)
    cases: dict[str, Case] = {}

    def add(name: str, data: bytes, codes: list[str], readme: str, status: int = 1) -> None:
        cases[name] = (data, status, codes, readme)

    # Cases bound to the report: a resealed edit of any committed field breaks the tree.
    for name, change, what in (
        (
            "case_score",
            _case_field("case", "helpfulness", "e03", score=0.25),
            "a score 0.675 -> 0.25",
        ),
        (
            "case_status",
            _case_field("case", "accuracy", "e00", status="pass"),
            "a status fail -> pass",
        ),
        (
            "case_error",
            _case_field("case", "accuracy", "e04", status="error"),
            "a status pass -> error",
        ),
        (
            "case_score_null",
            _case_field("case", "helpfulness", "e05", 1, score=None),
            "a score -> null",
        ),
        (
            "case_assurance",
            _case_field("case", "accuracy", "e07", assurance="reported"),
            "the assurance",
        ),
        (
            "case_scorer_digest",
            _case_field("case", "no_harm", "e02", scorer_digest=OTHER_DIGEST),
            "the scorer_digest",
        ),
        (
            "baseline_score",
            _case_field("baseline_case", "helpfulness", "e02", score=0.99),
            "a baseline case's score",
        ),
        (
            "baseline_status",
            _case_field("baseline_case", "accuracy", "e06", status="pass"),
            "a baseline case's status",
        ),
    ):
        add(
            f"resealed_{name}_fail",
            _resealed(change(full)),
            ["cases_root"],
            f"Resealed forgery: {what} changed, the trailer recomputed. The check's cases tree rebuilt from its lines no longer has the root the signed body commits to (no --replay needed).",
        )
    add(
        "resealed_case_repeat_fail",
        _resealed(_case_field("case", "no_harm", "e03", repeat=1)(full)),
        ["cases_root"],
        "Resealed forgery: a case's repeat 0 -> 1 (still in order): its leaf changes, so the tree's root does.",
    )
    add(
        "resealed_baseline_output_fail",
        _resealed(
            _edit(
                full,
                "baseline_case",
                lambda v: v.update(
                    output={"answer": "forged"},
                    output_digest="sha256:"
                    + hashlib.sha256(rfc8785.dumps({"answer": "forged"})).hexdigest(),
                ),
                check_id="accuracy",
                example_id="e04",
            )
        ),
        ["cases_root"],
        "Resealed forgery: a baseline case's output replaced together with a matching output_digest: the output verifies against its digest, but the digest is in the case record, so the baseline's tree fails.",
    )
    add(
        "resealed_baseline_dropped_fail",
        _resealed(drop(full, kind("baseline_case", check_id="accuracy", example_id="e08"))),
        ["cases_root"],
        "Resealed forgery: one baseline_case line removed: the baseline's lines no longer number what the body commits to.",
    )
    add(
        "resealed_case_dropped_fail",
        _resealed(drop(full, kind("case", check_id="no_harm", example_id="e09"))),
        ["cases_root", "evidence"],
        "Resealed forgery: one case line removed: the check's lines no longer number what the body commits to, and its evidence list changes.",
    )
    add(
        "resealed_header_baseline_fail",
        _resealed(_edit(full, "header", _set(baseline_evaluation_id=None))),
        ["baseline"],
        "Resealed forgery: the header's baseline_evaluation_id nulled: every comparison of the body names another baseline.",
    )
    add(
        "resealed_body_edit_fail",
        _resealed(_resealed_body_edit(full)),
        ["attestation"],
        "Resealed forgery: the body's result changed and its digest recomputed in the report line and the header: every digest agrees, but the signed statement is about another body.",
    )
    add(
        "signature_flipped_fail",
        _resealed(_edit(full, "report", _flip_signature)),
        ["signature"],
        "One bit of the DSSE signature flipped (trailer recomputed): the signature does not verify.",
    )
    add(
        "signer_key_removed_fail",
        _resealed(_edit(full, "header", _set(keys=[]))),
        ["signature"],
        "The header's keys emptied (trailer recomputed): with no --key given, no key known to the verifier signed the report.",
    )
    add(
        "unsigned_report_pass",
        _resealed(_edit(full, "report", lambda v: v.pop("attestation"))),
        [],
        "A report without its attestation (as issued before reports were signed): everything else is proven, the signer is listed as not proven.",
        status=0,
    )
    add(
        "foreign_header_fail",
        _resealed(
            [
                rfc8785.dumps(
                    {
                        **orjson.loads(full[0]),
                        "report_id": "00000000-0000-4000-8000-000000000000",
                        "report_digest": OTHER_DIGEST,
                    }
                ),
                *full,
            ]
        ),
        ["duplicate", "report_digest", "report_id"],
        "A foreign header prepended before the real one (trailer recomputed): the second header is refused, and the report is not the one the first header names.",
    )
    for line_kind, codes in (
        ("report", ["duplicate"]),
        ("suite_version", ["duplicate"]),
        ("scorer_version", ["duplicate"]),
        ("check", ["duplicate"]),
        ("unavailable", ["item"]),
        ("redacted", ["item"]),
    ):
        add(
            f"duplicated_{line_kind}_fail",
            _resealed(_duplicate(full, kind(line_kind))),
            codes,
            f"The first {line_kind} line written twice (trailer recomputed): refused (for the item lists: every item then explains its absence a second time).",
        )
    add(
        "duplicated_case_fail",
        _resealed(_duplicate(full, kind("case", check_id="accuracy", example_id="e05"))),
        ["duplicate"],
        "A case line written twice (trailer recomputed): two lines for one (check, example, repeat).",
    )
    add(
        "output_removed_fail",
        _resealed(
            _edit(full, "case", lambda v: v.pop("output"), check_id="no_harm", example_id="e06")
        ),
        ["unexplained"],
        "A case's output removed with no item explaining the absence (trailer recomputed).",
    )
    add(
        "output_item_dropped_fail",
        _resealed(_items(full, "unavailable", lambda items: items.pop())),
        ["unexplained"],
        "The unavailable item for an output removed by retention dropped (trailer recomputed): the absence is unexplained.",
    )
    add(
        "permission_items_dropped_fail",
        _resealed(_items(redacted, "redacted", _drop_permission_items)),
        ["unexplained"],
        "The redacted export with its permission items dropped (trailer recomputed): bodies and outputs are absent with nothing saying why.",
    )
    add(
        "sso_digest_fail",
        _resealed(
            _items(
                full,
                "unavailable",
                lambda items: next(i for i in items if i["reason"] == "stored_at_sso").update(
                    digest=OTHER_DIGEST
                ),
            )
        ),
        ["item", "unexplained"],
        "A stored_at_sso item whose digest is not the case's output_digest (trailer recomputed): the item explains nothing, so the output's absence is unexplained.",
    )
    add(
        "sso_object_key_fail",
        _resealed(
            _items(
                full,
                "unavailable",
                lambda items: next(i for i in items if i["reason"] == "stored_at_sso").update(
                    object_key="outputs/elsewhere.json"
                ),
            )
        ),
        ["item", "unexplained"],
        "A stored_at_sso item whose object key names another object (trailer recomputed).",
    )
    add(
        "item_moved_fail",
        _resealed(_move_item(full)),
        ["item", "unexplained"],
        "A trace_bodies item moved from the redacted line to the unavailable line (trailer recomputed): no unavailable item has that reason, and the traces are left unexplained.",
    )
    add(
        "unknown_case_field_fail",
        _resealed(_edit(full, "case", _set(verified=True), check_id="accuracy", example_id="e01")),
        ["unknown_field"],
        "A case line with a field the format does not have (trailer recomputed).",
    )
    add(
        "unknown_check_field_fail",
        _resealed(_edit(full, "check", _set(note="fine"), check_id="no_harm")),
        ["unknown_field"],
        "A check line with a field the format does not have (trailer recomputed).",
    )
    add(
        "unknown_kind_fail",
        _resealed([*full[:-2], rfc8785.dumps({"kind": "comment", "text": "hi"}), *full[-2:]]),
        ["unknown_kind"],
        "A line of a kind the format does not have (trailer recomputed).",
    )
    add(
        "unknown_assurance_fail",
        _resealed(_case_field("case", "accuracy", "e02", assurance="self_reported")(full)),
        ["cases_root", "evidence", "malformed"],
        "A case claiming an assurance level that does not exist (trailer recomputed): a named failure (--replay used to crash on it); the refused line leaves the check's tree and evidence short.",
    )
    add(
        "repeat_outside_suite_fail",
        _resealed(_case_field("case", "no_harm", "e11", repeat=7)(full)),
        ["cases_root"],
        "A case's repeat moved outside the suite's repeats (trailer recomputed): the tree fails; --replay names it too.",
    )
    add(
        "report_suite_swapped_fail",
        _resealed(_swap(full, 1, 2)),
        ["order", "suite_digest"],
        "The report and suite_version lines swapped (trailer recomputed): out of order, and the suite is read before the body that pins it.",
    )
    add(
        "check_dropped_fail",
        _resealed(drop(full, kind("check", check_id="no_harm"))),
        ["item", "missing_line", "order"],
        "A check line removed (trailer recomputed): its cases stand outside any check, the item explaining one of their outputs names a case no longer read, and the check line is missing.",
    )
    add(
        "trailer_duplicated_fail",
        gz([*full, full[-1]]),
        ["after_trailer"],
        "The trailer written twice: a line after the trailer.",
    )
    add(
        "trailer_count_fail",
        gz(_edit(full, "trailer", lambda v: v.update(lines=v["lines"] + 1))),
        ["trailer_lines"],
        "The trailer's line count off by one.",
    )
    for what, line_kind, change in (
        ("report_digest", "report", _set(digest=OTHER_DIGEST)),
        ("suite_digest", "suite_version", _set(digest=OTHER_DIGEST)),
        ("scorer_digest", "scorer_version", _set(digest=OTHER_DIGEST)),
        ("dataset_digest", "dataset_version", _set(digest=OTHER_DIGEST)),
        ("body_digest", "example", _set(body_digest=OTHER_DIGEST)),
        ("output_digest", "case", _set(output_digest=OTHER_DIGEST)),
        ("trailer_sha256", "trailer", _set(sha256=OTHER_DIGEST)),
    ):
        lines = _edit(full, line_kind, change)
        add(
            f"wrong_{what}_fail",
            gz(lines) if line_kind == "trailer" else _resealed(lines),
            {
                "report_digest": ["report_digest"],
                "suite_digest": ["suite_digest"],
                "scorer_digest": ["scorer_digest"],
                "dataset_digest": [
                    "dataset_count",
                    "dataset_digest",
                    "item",
                    "missing_line",
                    "order",
                ],
                "body_digest": ["dataset_digest"],
                "output_digest": ["cases_root", "evidence", "output_digest"],
                "trailer_sha256": ["trailer_sha256"],
            }[what],
            f"A well-formed but wrong digest in the first {line_kind} line's {what.replace('wrong_', '')} (trailer recomputed where a forger would).",
        )
    add(
        "wrong_evidence_ref_fail",
        _resealed(_case_field("case", "accuracy", "e02", evidence_refs=[OTHER_DIGEST])(full)),
        ["cases_root", "evidence"],
        "A case's evidence reference replaced by another well-formed digest (trailer recomputed).",
    )
    add(
        "wrong_key_id_fail",
        _resealed(_edit(full, "header", lambda v: v["keys"][0].update(keyid=OTHER_DIGEST))),
        ["keys", "signature"],
        "The header's key entry with a keyid that is not its public key's (trailer recomputed).",
    )
    add(
        "wrong_consistency_proof_fail",
        _resealed(
            _items(
                limited,
                "unavailable",
                lambda items: next(
                    i for i in items if i["reason"] == "case_limit" and i.get("consistency_proof")
                )["consistency_proof"].__setitem__(0, OTHER_DIGEST),
            )
        ),
        ["cases_root"],
        "The limited export with one node of a consistency proof replaced (trailer recomputed): the included prefix no longer leads to the committed root.",
    )
    add(
        "limited_case_edit_fail",
        _resealed(_case_field("case", "accuracy", "e01", status="fail")(limited)),
        ["cases_root"],
        "The limited export with an included case's status flipped (trailer recomputed): the prefix's root changes, so the consistency proof no longer reaches the committed root.",
    )
    # Number forms and encodings, written byte by byte (canonical writers refuse them).
    at = index_of(full, kind("case", check_id="helpfulness", example_id="e08", repeat=0))
    line = full[at]
    for name, data, codes, what in (
        (
            "number_form",
            line.replace(b'"score":0.8', b'"score":0.80'),
            ["not_canonical"],
            "0.8 written 0.80",
        ),
        (
            "exponent_form",
            line.replace(b'"repeat":0', b'"repeat":0e0'),
            ["not_canonical"],
            "repeat 0 written 0e0",
        ),
        (
            "float_repeat",
            line.replace(b'"repeat":0', b'"repeat":0.0'),
            ["not_canonical"],
            "repeat 0 written 0.0",
        ),
        ("bom", b"\xef\xbb\xbf" + line, ["encoding"], "a UTF-8 byte order mark before the line"),
        (
            "surrogate",
            line.replace(b'"status":"pass"', b'"status":"pass\\ud800"'),
            ["encoding"],
            "a lone surrogate escape in a string",
        ),
        (
            "big_integer",
            line.replace(b'"repeat":0', b'"repeat":9007199254740993'),
            ["limits"],
            "an integer beyond 2^53",
        ),
        ("huge_number", line.replace(b'"score":0.8', b'"score":1e400'), ["limits"], "1e400"),
        (
            "deep_nesting",
            line.replace(b'"evidence_refs":[]', b'"evidence_refs":' + b"[" * 3000 + b"]" * 3000),
            ["limits"],
            "a 3,000-deep array",
        ),
        (
            "invalid_utf8",
            line.replace(b'"status":"pass"', b'"status":"pa\xffss"'),
            ["encoding"],
            "a byte that is not UTF-8",
        ),
    ):
        assert data != line, name
        refused = codes != ["not_canonical"] and name != "bom"
        add(
            f"{name}_fail",
            _resealed(_raw_line(full, at, data)),
            [*codes, "cases_root", "evidence"] if refused else codes,
            f"A case line with {what} (trailer recomputed)"
            + (
                ": the line is refused, so its check's tree and evidence come up short."
                if refused
                else "."
            ),
        )
    # The gzip stream itself.
    add(
        "gzip_header_flags_fail",
        _gzip_flip(full_gz, 3, 0x20),
        ["gzip"],
        "A reserved flag set in the first gzip header.",
    )
    add(
        "gzip_crc_fail",
        _gzip_flip(full_gz, len(full_gz) - 6, 0x01),
        ["gzip"],
        "One bit of the gzip CRC-32 flipped.",
    )
    add(
        "gzip_length_fail",
        _gzip_flip(full_gz, len(full_gz) - 2, 0x01),
        ["gzip"],
        "One bit of the gzip ISIZE flipped.",
    )
    add(
        "trailing_zeros_fail",
        full_gz + b"\0" * 8,
        ["trailing_bytes"],
        "Eight zero bytes after the last gzip member.",
    )
    add(
        "trailing_junk_fail",
        full_gz + b"junk",
        ["trailing_bytes"],
        "Bytes after the last gzip member that are no member.",
    )
    add(
        "truncated_member_fail",
        full_gz[:-3],
        ["truncated"],
        "The last three bytes of the gzip stream cut off: the member is incomplete.",
    )
    assert gzip.decompress(full_gz)
    return cases
