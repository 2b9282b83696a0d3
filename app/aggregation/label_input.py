"""A judged check's labels as the engine reads them, from labels as the service stores them or
a bundle carries them: `{check_id, example_id, label, labeller, assurance}` each."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from app.aggregation.inputs import ASSURANCE_CODE, DatasetIndex, LabelColumns
from app.digest.merkle import hex_digest, root_of_joined
from app.domain.labels import label_value, labels_root, stored_label_leaf


def label_columns(labels: Sequence[Mapping[str, Any]], dataset: DatasetIndex) -> LabelColumns:
    """One judged check's labels: positions, values and assurance codes, and their tree's
    root (the labels may come in any order; the root sorts them)."""
    return LabelColumns(
        np.array([dataset.position(label["example_id"]) for label in labels], np.int32),
        np.array([label_value(label["label"]) for label in labels], np.float64),
        np.array([ASSURANCE_CODE[label["assurance"]] for label in labels], np.int8),
        labels_root(labels),
    )


def judged_label_columns(
    suite: Mapping[str, Any],
    labels: Mapping[str, Sequence[Mapping[str, Any]]],
    datasets: Mapping[str, DatasetIndex],
) -> dict[str, LabelColumns]:
    """Every judged check's labels (none for a check without one), by check id."""
    return {
        check["check_id"]: label_columns(
            labels.get(check["check_id"], []), datasets[check["dataset"]["digest"]]
        )
        for check in suite["checks"]
        if "calibration" in check
    }


@dataclass
class StoredLabels:
    """One judged check's labels as the service stores them, in example id byte order: each
    label's canonical JSON as stored, its value already a number, and (for a label taken since
    they are kept) its leaf hash and its example's position."""

    example_ids: list[str] = field(default_factory=list)
    labels: list[str] = field(default_factory=list)
    values: list[float] = field(default_factory=list)
    labellers: list[str] = field(default_factory=list)
    assurances: list[str] = field(default_factory=list)
    leaves: list[bytes | None] = field(default_factory=list)
    positions: list[int | None] = field(default_factory=list)

    def leaf_hashes(self, check_id: str) -> list[bytes]:
        """Each label's leaf hash: as stored, else hashed from the stored label."""
        return [
            leaf
            if leaf is not None
            else stored_label_leaf(check_id, example_id, label, labeller, assurance)
            for leaf, example_id, label, labeller, assurance in zip(
                self.leaves,
                self.example_ids,
                self.labels,
                self.labellers,
                self.assurances,
                strict=True,
            )
        ]


def stored_label_columns(
    check_id: str, stored: StoredLabels, dataset: DatasetIndex
) -> LabelColumns:
    """A judged check's labels as read from the service's table (example id byte order): the
    finish's path, without a dict, a parse or a sort per label."""
    if None in stored.leaves:
        leaves = b"".join(stored.leaf_hashes(check_id))
    else:
        leaves = b"".join(stored.leaves)  # type: ignore[arg-type]
    positions = dataset.positions
    return LabelColumns(
        np.array(
            [
                positions[example_id] if position is None else position
                for example_id, position in zip(stored.example_ids, stored.positions, strict=True)
            ],
            np.int32,
        ),
        np.array(stored.values, np.float64),
        np.array([ASSURANCE_CODE[a] for a in stored.assurances], np.int8),
        hex_digest(root_of_joined(leaves)),
    )
