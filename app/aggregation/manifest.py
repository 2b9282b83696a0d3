"""A check's evidence list and manifest (docs/report.md, the digests table)."""

from __future__ import annotations

import hashlib

import numpy as np
import orjson

from app.aggregation.inputs import CaseColumns, EvidenceList

MAX_EVIDENCE_REFS = 20


def evidence_list_of(document: bytes, total: int) -> EvidenceList:
    """The evidence list of a canonical JSON array of `total` entries: the entries themselves
    when there are at most MAX_EVIDENCE_REFS, else the manifest's digest (the document kept)."""
    if total <= MAX_EVIDENCE_REFS:
        return EvidenceList(list(orjson.loads(document)), False)
    digest = "sha256:" + hashlib.sha256(document).hexdigest()
    return EvidenceList([digest], True, document=document)


def settled_evidence_list(document: bytes, total: int) -> EvidenceList:
    """As `evidence_list_of`, with a manifest kept in its stored form (32 bytes an entry rather
    than 74): what a reader keeps while the other checks are read."""
    listed = evidence_list_of(document, total)
    if not listed.is_manifest:
        return listed
    return EvidenceList(listed.refs, True, digests=listed.stored())


def evidence(cases: CaseColumns) -> EvidenceList:
    """A check's evidence list and, when it is long, its manifest.

    The list runs over the cases in case order (example id, then repeat): each case's
    output digest, trace digest, then evidence refs. Entries are `sha256:<hex>` strings, so
    joining their JSON forms with commas is already the canonical JSON array.
    """
    if cases.evidence_list is not None:
        return cases.evidence_list
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
    return evidence_list_of(document, total)
