"""The lines of a bundle in the documented order (docs/bundles.md), read from the database as
they are written."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

import orjson

from app.bundles.format import CASE_LIMIT
from app.bundles.writing import case_line, line, number, raw
from app.digest import merkle
from app.digest.canonical import canonical_bytes, digest_of
from app.domain.labels import stored_labels_root
from app.domain.suites import scored_checks
from app.domain.vocabulary import COMPARATIVE_METHODS, COMPARATIVE_RULES
from app.models import DatasetVersion, ScorerVersion
from app.platform.db import ReadConnection
from app.platform.storage.bundle_writer import BundleWriter, ItemSpool
from app.repositories import bundles as repo
from app.repositories import labels as label_repo
from app.services.case_integrity import (
    CommittedTree,
    Finding,
    committed_trees,
    leaves_and_outputs,
    outputs_finding,
    root_findings,
)
from app.services.kit.case_trees import CaseTreeCache, TreeMismatch


@dataclass
class BundleSource:
    """What one bundle is built from (loaded before the first line is written)."""

    connection: ReadConnection
    report_id: uuid.UUID
    evaluation_id: uuid.UUID
    baseline_evaluation_id: uuid.UUID | None
    body: dict[str, Any]
    suite_content: dict[str, Any]
    scorers: dict[tuple[str, str], ScorerVersion]
    datasets: dict[str, DatasetVersion]
    can_read_bodies: bool
    case_limit: int = CASE_LIMIT
    trees: CaseTreeCache | None = None


@dataclass
class BundleLines:
    """Writes the lines after the header, report and suite version; tallies the items."""

    source: BundleSource
    writer: BundleWriter
    unavailable: ItemSpool = field(default_factory=ItemSpool)
    redacted: ItemSpool = field(default_factory=ItemSpool)
    holds_bodies: bool = False
    scorer_digests: dict[tuple[str, str], str] = field(default_factory=dict)
    # What the written cases prove against the trees the report binds (one pass: the rows
    # are hashed as their lines are written), and which (kind, check) were traversed.
    findings: list[Finding] = field(default_factory=list)
    traversed: set[tuple[str, str]] = field(default_factory=set)
    # The trees the report binds, by (kind, check id).
    trees: dict[tuple[str, str], CommittedTree] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.scorer_digests = {key: s.digest for key, s in self.source.scorers.items()}
        self.trees = {
            (tree.kind, tree.check_id): tree
            for tree in committed_trees(self.source.evaluation_id, self.source.body)
        }

    def versions_of(self, scorer_name: str) -> dict[str, str]:
        """Version -> digest of one of the pinned scorers."""
        return {v: d for (n, v), d in self.scorer_digests.items() if n == scorer_name}

    def untraversed(self) -> list[CommittedTree]:
        """The bound trees the written lines did not pass through."""
        return [tree for key, tree in self.trees.items() if key not in self.traversed]

    async def scorers(self) -> None:
        """One line per pinned scorer version that is available, else an unavailable item."""
        seen: set[tuple[str, str]] = set()
        for check in scored_checks(self.source.suite_content):
            pinned = check["scorer"]
            name, version = pinned["name"], pinned["version"]
            if (name, version) in seen:
                continue
            seen.add((name, version))
            ref = {"name": name, "version": version, "digest": pinned["digest"]}
            scorer = self.source.scorers.get((name, version))
            if scorer is None or scorer.retired_at is not None:
                self.unavailable.add(
                    {"what": "scorer_version", "ref": ref, "reason": "scorer_missing"}
                )
                continue
            definition = orjson.loads(scorer.definition)
            computed = digest_of({"name": name, "version": version, "definition": definition})
            if computed != pinned["digest"]:
                self.unavailable.add(
                    {"what": "scorer_version", "ref": ref, "reason": "scorer_digest_mismatch"}
                )
                continue
            score_range = (
                None
                if scorer.score_lo is None or scorer.score_hi is None
                else [number(scorer.score_lo), number(scorer.score_hi)]
            )
            await self.writer.write(
                line(
                    {
                        "kind": "scorer_version",
                        **ref,
                        "definition": raw(canonical_bytes(definition)),
                        "score_range": score_range,
                    }
                )
            )

    async def datasets(self) -> None:
        """Each dataset version's line, then its examples in id order."""
        for ref in self.source.body["dataset_refs"]:
            digest = ref["digest"]
            dataset = self.source.datasets[digest]
            await self.writer.write(
                line(
                    {
                        "kind": "dataset_version",
                        "name": ref["name"],
                        "version": ref["version"],
                        "digest": digest,
                        "example_count": dataset.example_count,
                    }
                )
            )
            withheld = 0
            async for rows in repo.examples(self.source.connection, dataset.id):
                lines = []
                for example_id, tags, body_digest, body, removed in rows:
                    fields: dict[str, Any] = {
                        "kind": "example",
                        "dataset": digest,
                        "id": example_id,
                        "tags": tags,
                        "body_digest": body_digest,
                    }
                    if body is None:
                        if removed:
                            self.unavailable.add(
                                {
                                    "what": "example_body",
                                    "ref": {"dataset": digest, "example_id": example_id},
                                    "reason": "retention",
                                }
                            )
                    elif self.source.can_read_bodies:
                        fields["body"] = raw(body)
                        self.holds_bodies = True
                    else:
                        withheld += 1
                    lines.append(line(fields))
                await self.writer.write_lines(lines)
            if withheld:
                self.redacted.add(
                    {
                        "what": "example_bodies",
                        "ref": {"dataset": digest},
                        "reason": "permission",
                        "count": withheld,
                    }
                )

    async def checks(self) -> None:
        """Per check in suite order: its line, its cases, and for a comparative check the
        baseline's cases; each kind of case has its own limit across the bundle."""
        source = self.source
        counts = await repo.case_counts(source.connection, source.evaluation_id)
        baseline_counts = (
            {}
            if source.baseline_evaluation_id is None
            else await repo.case_counts(source.connection, source.baseline_evaluation_id)
        )
        budgets = {"case": source.case_limit, "baseline_case": source.case_limit}
        rule = source.suite_content["decision_rule"]["rule"]
        definitions = {c["check_id"]: c for c in source.suite_content["checks"]}
        for result in source.body["checks"]:
            check_id = result["check_id"]
            definition = definitions[check_id]
            fields: dict[str, Any] = {
                "kind": "check",
                "check_id": check_id,
                "result": raw(canonical_bytes(result)),
            }
            if result["evidence_manifest"]:
                stored = await repo.manifest(source.connection, source.report_id, check_id)
                assert stored is not None, f"report {source.report_id} lacks a manifest"
                fields["manifest"] = raw(stored)
            await self.writer.write(line(fields))
            del fields
            if "measure" in definition:
                # Its cases are those of the check it measures, written with that check.
                continue
            await self._cases(
                "case", source.evaluation_id, definition, counts.get(check_id, 0), budgets
            )
            comparative = (
                rule in COMPARATIVE_RULES
                and definition["aggregation"]["method"] in COMPARATIVE_METHODS
            )
            if comparative and source.baseline_evaluation_id is not None:
                await self._cases(
                    "baseline_case",
                    source.baseline_evaluation_id,
                    definition,
                    baseline_counts.get(check_id, 0),
                    budgets,
                )
            calibration = result.get("calibration")
            if calibration is not None:
                await self._labels("label", source.evaluation_id, check_id, calibration)
                if "baseline_labels_root" in calibration:
                    assert source.baseline_evaluation_id is not None
                    await self._labels(
                        "baseline_label", source.baseline_evaluation_id, check_id, calibration
                    )

    async def _cases(
        self,
        kind: str,
        evaluation_id: uuid.UUID,
        definition: dict[str, Any],
        total: int,
        budgets: dict[str, int],
    ) -> None:
        check_id = definition["check_id"]
        check_json = orjson.dumps(check_id)
        scorer_name = definition["scorer"]["name"]
        kept = min(total, budgets[kind])
        budgets[kind] -= kept
        withheld = traced = 0
        ref = {"kind": kind, "check_id": check_id}
        committed = self._committed(kind, check_id)
        self.traversed.add((kind, check_id))
        versions = self.versions_of(scorer_name)
        leaves = bytearray()
        forged: list[str] = []
        if kept:
            async for rows in repo.cases(self.source.connection, evaluation_id, check_id, kept):
                lines = []
                for row in rows:
                    data, has_output = self._case_line(kind, check_id, check_json, scorer_name, row)
                    withheld += has_output and not self.source.can_read_bodies
                    traced += row["trace_id"] is not None
                    lines.append(data)
                if committed is not None:
                    more, bad = leaves_and_outputs(rows, versions)
                    leaves += more
                    forged += bad
                await self.writer.write_lines(lines)
        if withheld:
            self.redacted.add(
                {"what": "case_outputs", "ref": ref, "reason": "permission", "count": withheld}
            )
        if traced:
            self.redacted.add(
                {
                    "what": "trace_bodies",
                    "ref": ref,
                    "reason": "trace_capture_policy",
                    "count": traced,
                }
            )
        proof = None
        if total > kept:
            proof = await self._left_out(kind, evaluation_id, check_id, total, kept)
        if committed is not None and kept:
            self._prove(kind, check_id, committed, bytes(leaves), forged, total, proof)

    async def _labels(
        self, kind: str, evaluation_id: uuid.UUID, check_id: str, calibration: dict[str, Any]
    ) -> None:
        """A judged check's labels in example order, their notes where the exporter may read
        bodies; the stored labels against the root the report binds (a mismatch is a
        finding, as a case's is)."""
        rows = await label_repo.of_check(self.source.connection, evaluation_id, check_id)
        lines, withheld = [], 0
        for row in rows:
            fields: dict[str, Any] = {
                "kind": kind,
                "check_id": check_id,
                "example_id": row["example_id"],
                "label": raw(row["label"]),
                "labeller": row["labeller"],
                "assurance": row["assurance"],
            }
            if row["note"] is not None and self.source.can_read_bodies:
                fields["note"] = raw(canonical_bytes(row["note"]))
            withheld += row["note"] is not None and not self.source.can_read_bodies
            lines.append(line(fields))
        await self.writer.write_lines(lines)
        if withheld:
            ref = {"kind": kind, "check_id": check_id}
            self.redacted.add(
                {"what": "label_notes", "ref": ref, "reason": "permission", "count": withheld}
            )
        key = "labels_root" if kind == "label" else "baseline_labels_root"
        # The rows come in example id byte order, the tree's order.
        if stored_labels_root(check_id, rows) != calibration.get(key):
            self.findings.append(
                Finding("labels", f"the {kind}s of {check_id!r} no longer rebuild its {key}")
            )

    async def _left_out(
        self, kind: str, evaluation_id: uuid.UUID, check_id: str, total: int, kept: int
    ) -> list[str] | None:
        """The unavailable item of the cases past the limit; its consistency proof, if any."""
        first, last = await repo.left_out_bounds(
            self.source.connection, evaluation_id, check_id, kept
        )
        item: dict[str, Any] = {
            "what": "cases",
            "ref": {"kind": kind, "check_id": check_id},
            "reason": "case_limit",
            "count": total - kept,
            "first": {"example_id": first["example_id"], "repeat": first["repeat"]},
            "last": {"example_id": last["example_id"], "repeat": last["repeat"]},
        }
        proof = await self._consistency_proof(kind, evaluation_id, check_id, kept)
        if proof is not None:
            item["consistency_proof"] = proof
        self.unavailable.add(item)
        return proof

    def _committed(self, kind: str, check_id: str) -> dict[str, Any] | None:
        """The cases tree (count, root) the report binds for these cases, if any."""
        tree = self.trees.get((kind, check_id))
        return None if tree is None else tree.committed

    def _prove(
        self,
        kind: str,
        check_id: str,
        committed: dict[str, Any],
        leaves: bytes,
        forged: list[str],
        total: int,
        proof: list[str] | None,
    ) -> None:
        """The written cases against the bound tree: all of them against its root, or the
        first `kept` through the consistency proof to it; outputs against their digests."""
        label = self.trees[(kind, check_id)].label
        if forged:
            self.findings.append(outputs_finding(label, forged))
        kept = len(leaves) // 32
        if kept == total:
            self.findings += root_findings(label, leaves, committed)
            return
        if total != committed.get("count"):
            bound = committed.get("count")
            self.findings.append(Finding("cases", f"{label}: {total} cases stored, {bound} bound"))
            return
        implied = None
        if proof is not None:
            implied = merkle.root_from_consistency(
                kept,
                merkle.root_of_joined(leaves),
                total,
                [merkle.from_hex_digest(p) for p in proof],
            )
        if implied is None or merkle.hex_digest(implied) != committed.get("root"):
            self.findings.append(
                Finding("cases", f"{label}: the written case rows do not lead to the bound root")
            )

    async def _consistency_proof(
        self, kind: str, evaluation_id: uuid.UUID, check_id: str, kept: int
    ) -> list[str] | None:
        """PROOF(kept, D[n]) of the check's cases tree (None for a report without one)."""
        committed = self._committed(kind, check_id)
        if committed is None or self.source.trees is None:
            return None
        try:
            tree = await self.source.trees.get(
                self.source.connection,
                evaluation_id,
                check_id,
                committed["count"],
                merkle.from_hex_digest(committed["root"]),
            )
        except TreeMismatch:
            # The stored leaves disagree with the root; _prove reports it without a proof.
            return None
        return merkle.digests(tree.consistency_proof(kept))

    def _case_line(
        self, kind: str, check_id: str, check_json: bytes, scorer_name: str, row: Any
    ) -> tuple[bytes, bool]:
        """A case line, and whether the case has an output the exporter may see."""
        digest = self.scorer_digests.get((scorer_name, row["scorer_version"]))
        output = row["output"]
        scorer_json = orjson.dumps(digest)
        kind_json = orjson.dumps(kind)
        if output is not None:
            shown = output if self.source.can_read_bodies else None
            self.holds_bodies = self.holds_bodies or shown is not None
            return case_line(kind_json, check_json, row, scorer_json, shown), True
        self._unavailable_output(kind, check_id, row)
        return case_line(kind_json, check_json, row, scorer_json, None), False

    def _unavailable_output(self, kind: str, check_id: str, row: Any) -> None:
        """An output removed by retention, or kept in object storage, is unavailable."""
        case_ref = {
            "kind": kind,
            "check_id": check_id,
            "example_id": row["example_id"],
            "repeat": row["repeat"],
        }
        if row["removed"]:
            self.unavailable.add(
                {
                    "what": "case_output",
                    "ref": case_ref,
                    "reason": "retention",
                    "digest": row["output_digest"],
                }
            )
        elif row["output_key"] is not None:
            self.unavailable.add(
                {
                    "what": "case_output",
                    "ref": case_ref,
                    "reason": "stored_at_sso",
                    "digest": row["output_digest"],
                    "object_key": row["output_key"],
                }
            )


async def write_bundle(writer: BundleWriter, lines: BundleLines, first: tuple[bytes, ...]) -> None:
    """Every line of the bundle, in order, through `writer` (its parts spooled)."""
    try:
        for data in first:
            await writer.write(data)
        await lines.scorers()
        await lines.datasets()
        await lines.checks()
        await writer.write_chunks(lines.unavailable.chunks("unavailable"))
        await writer.write_chunks(lines.redacted.chunks("redacted"))
        await writer.finish()
    except BaseException:
        await writer.discard()
        raise
    finally:
        lines.unavailable.close()
        lines.redacted.close()
