"""The permissions a token may hold: one list, light enough for the command line's help (which
must not import pydantic), from which the API's schema and the service's checks are made."""

from __future__ import annotations

PERMISSIONS: tuple[str, ...] = (
    "suite.write",
    "dataset.write",
    "scorer.write",
    "evaluation.write",
    "report.read",
    "report.export",
    "label.write",
    "board.write",
    "dataset.read_body",
    "peer.manage",
    "admin",
)
