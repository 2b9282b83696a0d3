"""What the service proves about a stored report beyond its digest (docs/bundles.md, "What the
service checks"): the attestation, every cases root re-hashed from the case rows' columns,
each stored output against its digest, each judged check's labels roots re-hashed from the
stored labels, and the envelope against the signed supersession statements. Each failure is
one finding naming the part that failed."""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import orjson
from sqlalchemy.ext.asyncio import AsyncSession

from app.digest.canonical import timestamp
from app.digest.signing import report_statement, verify_envelope
from app.domain.labels import stored_labels_root
from app.models import Report, ReportEnvelope
from app.repositories import integrity as repo
from app.repositories import signing as signing_repo
from app.services.case_integrity import (
    CommittedTree,
    Finding,
    committed_trees,
    tree_findings,
)
from app.services.tree_verifying import trees_findings_apart


@dataclass
class Lookups:
    """What verifying a batch of reports reads once for all of them: the service's keys, when
    it first signed, the reports' attestations and supersession statements, scorer digests."""

    keys: dict[str, bytes]
    first_key: datetime | None
    attestations: dict[uuid.UUID, Any]
    supersessions: dict[uuid.UUID, Any]
    scorers: dict[tuple[uuid.UUID, str], dict[str, str]] = field(default_factory=dict)

    async def scorer_digests(
        self, session: AsyncSession, project_id: uuid.UUID, name: str
    ) -> dict[str, str]:
        """Version -> digest of a project's scorer (read once per round)."""
        key = (project_id, name)
        if key not in self.scorers:
            self.scorers[key] = await repo.scorer_digests(session, project_id, name)
        return self.scorers[key]


async def lookups(session: AsyncSession, report_ids: list[uuid.UUID]) -> Lookups:
    """Everything `findings` reads beyond the reports' own rows, for these reports."""
    return Lookups(
        keys={key.keyid: key.public_key for key in await signing_repo.all_keys(session)},
        first_key=await repo.first_key_created(session),
        attestations=await repo.attestations_of(session, report_ids),
        supersessions=await repo.supersessions_of(session, report_ids),
    )


def _payload(envelope_bytes: bytes) -> bytes | None:
    try:
        document = orjson.loads(envelope_bytes)
        return base64.b64decode(document["payload"], validate=True)
    except (orjson.JSONDecodeError, KeyError, TypeError, binascii.Error):
        return None


def attestation_findings(report: Report, body: dict[str, Any], found: Lookups) -> list[Finding]:
    """The report's DSSE envelope: present when the report was issued signed, signed by one of
    the service's keys, its digest column its own, its statement exactly this body's."""
    keys = found.keys
    row = found.attestations.get(report.id)
    if row is None:
        first_key = found.first_key
        if first_key is not None and report.issued_at >= first_key:
            return [Finding("attestation", "missing, though the report was issued signed")]
        return []
    if row.digest != "sha256:" + hashlib.sha256(row.envelope).hexdigest():
        return [Finding("attestation", "the stored envelope does not hash to its digest")]
    try:
        verify_envelope(row.envelope, keys)
    except (ValueError, KeyError, TypeError, binascii.Error, orjson.JSONDecodeError):
        return [Finding("attestation", "no signature verifies with the service's keys")]
    subject = body.get("subject")
    if not isinstance(subject, dict) or "digest" not in subject:
        return [Finding("attestation", "the body names no subject digest to attest")]
    expected = report_statement(report.body, str(report.id), report.digest, subject)
    if _payload(row.envelope) != expected:
        return [Finding("attestation", "the signed statement is not this body's")]
    return []


def _supersession_facts(envelope: ReportEnvelope) -> dict[str, Any]:
    return {
        "superseded_report_id": str(envelope.report_id),
        "successor_report_id": None
        if envelope.superseded_by is None
        else str(envelope.superseded_by),
        "reason": envelope.superseded_reason,
        "at": None if envelope.superseded_at is None else timestamp(envelope.superseded_at),
    }


def envelope_findings(report: Report, envelope: ReportEnvelope, found: Lookups) -> list[Finding]:
    """The envelope against the signed supersession statement of this report: a superseded
    envelope needs one saying so (who, when, why), a current one must have none."""
    keys = found.keys
    row = found.supersessions.get(report.id)
    if row is None:
        if envelope.status != "superseded" or envelope.superseded_at is None:
            return []
        first_key = found.first_key
        if first_key is not None and envelope.superseded_at >= first_key:
            return [Finding("envelope", "superseded, but no signed statement says so")]
        return []
    try:
        statement = verify_envelope(row.envelope, keys)
    except (ValueError, KeyError, TypeError, binascii.Error, orjson.JSONDecodeError):
        return [Finding("envelope", "the supersession statement's signature does not verify")]
    predicate = statement.get("predicate") or {}
    if predicate.get("superseded_report_digest") != report.digest:
        return [Finding("envelope", "the supersession statement names another body")]
    if envelope.status != "superseded":
        successor = predicate.get("successor_report_id")
        return [
            Finding(
                "envelope",
                f"current, but a signed statement says superseded by {successor} "
                f"at {predicate.get('at')}",
            )
        ]
    facts = _supersession_facts(envelope)
    differing = sorted(key for key, value in facts.items() if predicate.get(key) != value)
    if differing:
        return [
            Finding("envelope", "differs from its signed supersession: " + ", ".join(differing))
        ]
    return []


async def trees_findings(
    session: AsyncSession, project_id: uuid.UUID, trees: list[CommittedTree], lookups_: Lookups
) -> list[Finding]:
    """The given cases trees recomputed from their rows: when a report's trees of
    `APART_TREE_MIN` cases or more hold `APART_TOTAL_MIN` cases together, those in a program
    of their own (app/services/tree_verifying.py), the others here."""
    digests = [
        await lookups_.scorer_digests(session, project_id, tree.scorer_name) for tree in trees
    ]
    apart = [i for i, tree in enumerate(trees) if _count(tree) >= APART_TREE_MIN]
    if sum(_count(trees[i]) for i in apart) < APART_TOTAL_MIN:
        apart = []
    answers = await trees_findings_apart(session, [(trees[i], digests[i]) for i in apart])
    by_tree = dict(zip(apart, answers, strict=True))
    found: list[Finding] = []
    for i, tree in enumerate(trees):
        found += by_tree[i] if i in by_tree else await tree_findings(session, tree, digests[i])
    return found


# Below these a program's start (about 0.9 s of CPU) costs more than hashing here spares.
APART_TREE_MIN = 10_000
APART_TOTAL_MIN = 100_000


def _count(tree: CommittedTree) -> int:
    count = tree.committed.get("count")
    return count if isinstance(count, int) else 0


def _baseline_tree(check: dict[str, Any]) -> Any:
    """A body check's comparison's baseline tree, or None."""
    comparison = check.get("comparison")
    return comparison.get("baseline_cases") if isinstance(comparison, dict) else None


def measured_findings(body: dict[str, Any]) -> list[Finding]:
    """A measure check binds the trees of the check it measures: any other tree is a finding."""
    checks = {c.get("check_id"): c for c in body.get("checks") or [] if isinstance(c, dict)}
    found: list[Finding] = []
    for check_id, check in checks.items():
        measure = check.get("measure")
        if not isinstance(measure, dict):
            continue
        source = checks.get(measure.get("of")) or {}
        mine = _baseline_tree(check)
        if check.get("cases") != source.get("cases") or mine not in (None, _baseline_tree(source)):
            found.append(
                Finding("cases", f"{check_id}: its trees are not those of {measure.get('of')}")
            )
    return found


@dataclass(frozen=True)
class LabelTree:
    """A labels root a report binds: whose labels (evaluation, check), the calibration's key
    (`labels_root`, or `baseline_labels_root` for the baseline's) and the root bound."""

    evaluation_id: str | None
    check_id: str
    key: str
    bound: Any


def label_trees(evaluation_id: uuid.UUID, body: dict[str, Any]) -> list[LabelTree]:
    """Every labels root the body binds: each judged check's own, and its baseline's where the
    comparison corrects both sides."""
    trees: list[LabelTree] = []
    for check in body.get("checks") or []:
        calibration = check.get("calibration") if isinstance(check, dict) else None
        if not isinstance(calibration, dict):
            continue
        check_id = str(check.get("check_id"))
        own = calibration.get("labels_root")
        trees.append(LabelTree(str(evaluation_id), check_id, "labels_root", own))
        if "baseline_labels_root" in calibration:
            comparison = check.get("comparison")
            baseline = (comparison if isinstance(comparison, dict) else {}).get(
                "baseline_evaluation_id"
            )
            bound = calibration["baseline_labels_root"]
            trees.append(LabelTree(_uuid_text(baseline), check_id, "baseline_labels_root", bound))
    return trees


def _uuid_text(value: Any) -> str | None:
    """`value` as a UUID's text, or None when it is none (a body changed behind the service:
    its digest fails too, and no query is made of it)."""
    try:
        return str(uuid.UUID(str(value)))
    except ValueError:
        return None


# Labels hashed on the event loop at most (a few milliseconds); more go to a worker thread, so
# that a sweep of a report with many labels lets requests in meanwhile.
LABELS_ON_THE_LOOP = 2_000


async def labels_findings(
    session: AsyncSession, evaluation_id: uuid.UUID, body: dict[str, Any]
) -> list[Finding]:
    """Each labels root the body binds, rebuilt from the stored labels' columns (never from the
    stored leaf), as a bundle's writer and both verifiers rebuild it."""
    found: list[Finding] = []
    for tree in label_trees(evaluation_id, body):
        if tree.evaluation_id is None:
            found.append(
                Finding("labels", f"{tree.check_id!r} binds a {tree.key} of no baseline evaluation")
            )
            continue
        rows = await repo.label_rows(session, tree.evaluation_id, tree.check_id)
        if len(rows) > LABELS_ON_THE_LOOP:
            root = await asyncio.to_thread(stored_labels_root, tree.check_id, rows)
        else:
            root = stored_labels_root(tree.check_id, rows)
        if root != tree.bound:
            found.append(
                Finding(
                    "labels",
                    f"the labels of {tree.check_id!r} no longer rebuild its {tree.key}",
                )
            )
    return found


async def findings(
    session: AsyncSession,
    report: Report,
    envelope: ReportEnvelope,
    body: dict[str, Any],
    found: Lookups | None = None,
    *,
    cases: bool = True,
) -> list[Finding]:
    """Everything beyond the digest that no longer proves what it should (without the cases
    and labels trees when `cases` is false: an export proves those as it writes them)."""
    found = found if found is not None else await lookups(session, [report.id])
    trees = committed_trees(report.evaluation_id, body) if cases else []
    labels = await labels_findings(session, report.evaluation_id, body) if cases else []
    return [
        *attestation_findings(report, body, found),
        *measured_findings(body),
        *await trees_findings(session, report.project_id, trees, found),
        *labels,
        *envelope_findings(report, envelope, found),
    ]
