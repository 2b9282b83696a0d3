"""A judged check's labels as the engine reads them, from labels as the service stores them or
a bundle carries them: `{check_id, example_id, label, labeller, assurance}` each."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from app.aggregation.inputs import ASSURANCE_CODE, DatasetIndex, LabelColumns
from app.domain.labels import label_value, labels_root


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
