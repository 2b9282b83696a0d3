"""A report as a CycloneDX 1.6 ML-BOM: the subject as a `machine-learning-model` component
whose model card carries a performance metric per check and slice, with its confidence
interval, and references to the report and its signed test result."""

from __future__ import annotations

import uuid
from typing import Any

from app.domain.reports import subject_name
from app.formats.test_result import report_page

SPEC_VERSION = "1.6"
MEDIA_TYPE = "application/vnd.cyclonedx+json; version=1.6"
# Subject digest algorithms CycloneDX names, with their hex lengths; any other digest (or one
# of another length) stays a property of the component only.
HASH_ALGORITHMS = {
    "md5": ("MD5", 32),
    "sha1": ("SHA-1", 40),
    "sha256": ("SHA-256", 64),
    "sha384": ("SHA-384", 96),
    "sha512": ("SHA-512", 128),
    "sha3-256": ("SHA3-256", 64),
    "sha3-384": ("SHA3-384", 96),
    "sha3-512": ("SHA3-512", 128),
}


def _metric(aggregation: dict[str, Any], item: dict[str, Any], slice_name: str) -> dict[str, Any]:
    metric: dict[str, Any] = {
        "type": aggregation["method"],
        "value": repr(float(item["score"])),
        "slice": slice_name,
    }
    interval = item.get("interval") or {}
    # A quantile of a small sample may lack an end (docs/verdicts.md, section 12): the bound
    # is left out rather than invented.
    bounds = {
        f"{end}Bound": repr(float(interval[end]))
        for end in ("lower", "upper")
        if interval.get(end) is not None
    }
    if bounds:
        metric["confidenceInterval"] = bounds
    return metric


def performance_metrics(body: dict[str, Any]) -> list[dict[str, Any]]:
    """A metric per scored check (its slice: the check id) and per scored slice (check/slice)."""
    metrics = []
    for check in body["checks"]:
        if check["score"] is not None:
            metrics.append(_metric(check["aggregation"], check, check["check_id"]))
        for item in check["slices"]:
            if item.get("score") is not None:
                name = f"{check['check_id']}/{item['name']}"
                metrics.append(_metric(check["aggregation"], item, name))
    return metrics


def bom(body: dict[str, Any], report_digest: str, base: str, version: str) -> dict[str, Any]:
    """The BOM: one component, the subject, with its evaluation as its model card."""
    report_id = body["report_id"]
    subject = body["subject"]
    algorithm, _, value = str(subject["digest"]).partition(":")
    component: dict[str, Any] = {
        "type": "machine-learning-model",
        "bom-ref": "subject",
        "name": subject_name(subject) or str(subject["digest"]),
        "modelCard": {"quantitativeAnalysis": {"performanceMetrics": performance_metrics(body)}},
        "externalReferences": [
            {
                "type": "evidence",
                "url": report_page(base, report_id),
                "comment": f"EvalBook report {report_id} ({body['result']}), {report_digest}",
                "hashes": [{"alg": "SHA-256", "content": report_digest.removeprefix("sha256:")}],
            },
            {
                "type": "attestation",
                "url": f"{base}/evaluations/api/reports/{report_id}/attestation"
                "?predicate=test-result",
                "comment": "the in-toto test-result statement, signed",
            },
        ],
        "properties": [
            {"name": "evalbook:subject_digest", "value": str(subject["digest"])},
            {"name": "evalbook:result", "value": body["result"]},
            {
                "name": "evalbook:suite",
                "value": f"{body['suite_ref']['name']}@{body['suite_ref']['version']}",
            },
        ],
    }
    named, length = HASH_ALGORITHMS.get(algorithm, ("", 0))
    if len(value) == length:
        component["hashes"] = [{"alg": named, "content": value}]
    return {
        "bomFormat": "CycloneDX",
        "specVersion": SPEC_VERSION,
        # One report, one BOM: its serial number is the report's id.
        "serialNumber": uuid.UUID(report_id).urn,
        "version": 1,
        "metadata": {
            "timestamp": body["issued_at"],
            "tools": {
                "components": [
                    {"type": "application", "name": "EvalBook Reports", "version": version}
                ]
            },
        },
        "components": [component],
    }
