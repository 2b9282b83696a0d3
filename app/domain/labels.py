"""Human labels of a judged check (docs/judges.md): which examples are in the label sample, what a
label's value is, and the leaf that binds a label into its check's labels tree. No numpy, so
that both bundle verifiers and the command line import it cheaply."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from typing import Any

import orjson

from app.digest.canonical import canonical_bytes
from app.digest.merkle import hex_digest, leaf_hash, root

SAMPLE_DOMAIN = b"evalbook.label-sample.v1\0"
# A label counts toward the corrected verdict only at this assurance or above.
COUNTING_ASSURANCE = "human_attested"
PASS_LABELS = {"pass": 1.0, "fail": 0.0}
# The fields of a label its leaf commits to (the note is a body, redactable, and is not).
LEAF_FIELDS = ("check_id", "example_id", "label", "labeller", "assurance")


def sample_prefix(sample_seed: str, check_id: str) -> bytes:
    """What every example's sample hash of one judged check starts with."""
    return SAMPLE_DOMAIN + sample_seed.encode() + b"\0" + check_id.encode() + b"\0"


def sample_draw(sample_seed: str, check_id: str, example_id: str) -> float:
    """The example's draw u in [0, 1): the first 8 bytes of its sample hash over 2**64."""
    digest = hashlib.sha256(sample_prefix(sample_seed, check_id) + example_id.encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def in_sample(calibration: Mapping[str, Any], check_id: str, example_id: str) -> bool:
    """Whether a judged check (its frozen `calibration`) asks for a label on the example."""
    draw = sample_draw(calibration["sample_seed"], check_id, example_id)
    return bool(draw < calibration["label_fraction"])


def sample_heads(sample_seed: str, check_id: str, example_ids: Iterable[str]) -> bytes:
    """The first 8 bytes of each example's sample hash, one after the other: the draws of a
    judged check, big-endian, before they are divided by 2**64."""
    prefix = hashlib.sha256(sample_prefix(sample_seed, check_id))
    heads = bytearray()
    for example_id in example_ids:
        hasher = prefix.copy()
        hasher.update(example_id.encode())
        heads += hasher.digest()[:8]
    return bytes(heads)


def sampled_ids(
    calibration: Mapping[str, Any], check_id: str, example_ids: Iterable[str]
) -> list[str]:
    """The example ids of a judged check's label sample, in the order given."""
    ids = list(example_ids)
    heads = sample_heads(calibration["sample_seed"], check_id, ids)
    fraction = calibration["label_fraction"]
    return [
        example_id
        for i, example_id in enumerate(ids)
        if int.from_bytes(heads[8 * i : 8 * i + 8], "big") / 2**64 < fraction
    ]


def label_value(label: str | float) -> float:
    """A label as the number the estimate averages: pass 1, fail 0, a number itself."""
    if isinstance(label, str):
        return PASS_LABELS[label]
    return float(label)


def label_leaf(label: Mapping[str, Any]) -> bytes:
    """A label's RFC 6962 leaf hash: of the canonical JSON of its bound fields."""
    return leaf_hash(canonical_bytes({key: label[key] for key in LEAF_FIELDS}))


def stored_label_leaf(
    check_id: str, example_id: str, label_json: str, labeller: str, assurance: str
) -> bytes:
    """`label_leaf` from a label's canonical JSON as the service stores it, written out in key
    order (orjson writes a string as RFC 8785 does): no dict, no re-encoding of the label."""
    return leaf_hash(
        b'{"assurance":%b,"check_id":%b,"example_id":%b,"label":%b,"labeller":%b}'
        % (
            orjson.dumps(assurance),
            orjson.dumps(check_id),
            orjson.dumps(example_id),
            label_json.encode(),
            orjson.dumps(labeller),
        )
    )


def stored_labels_root(check_id: str, rows: Iterable[Mapping[Any, Any]]) -> str:
    """The labels tree's root over one check's labels as the service stores them (`example_id`,
    `label` as canonical JSON, `labeller`, `assurance`), given in example id byte order."""
    return hex_digest(
        root(
            [
                stored_label_leaf(
                    check_id, row["example_id"], row["label"], row["labeller"], row["assurance"]
                )
                for row in rows
            ]
        )
    )


def labels_root(labels: Iterable[Mapping[str, Any]]) -> str:
    """The labels tree's root over one check's labels, sorted by example id (byte order)."""
    ordered = sorted(labels, key=lambda item: item["example_id"].encode())
    return hex_digest(root([label_leaf(item) for item in ordered]))
