"""A check's evidence list and manifest (docs/report.md, the digests table)."""

from __future__ import annotations

import hashlib

import numpy as np
import orjson

from app.aggregation.inputs import CaseColumns

MAX_EVIDENCE_REFS = 20


def evidence(cases: CaseColumns) -> tuple[list[str], bool, bytes]:
    """(evidence_refs, evidence_manifest, the manifest's canonical JSON) for one check.

    The list runs over the cases in case order (example id, then repeat): each case's
    output digest, trace digest, then evidence refs. Entries are `sha256:<hex>` strings, so
    joining their JSON forms with commas is already the canonical JSON array.
    """
    if isinstance(cases.evidence_document, bytes):
        document, total = cases.evidence_document, cases.evidence_total
    elif cases.evidence_document is not None:
        document = ("[" + cases.evidence_document + "]").encode()
        total = cases.evidence_total
    else:
        order = np.lexsort((cases.repeat, cases.example_index))
        present = cases.evidence_count[order] > 0
        fragments = cases.evidence[order][present]
        document = ("[" + ",".join(fragments.tolist()) + "]").encode()
        total = int(cases.evidence_count.sum())
    if total <= MAX_EVIDENCE_REFS:
        return list(orjson.loads(document)), False, document
    digest = "sha256:" + hashlib.sha256(document).hexdigest()
    return [digest], True, document
