"""cases.leaf: each case's RFC 6962 leaf hash; the service may update only retention columns

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-30
"""

import json
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from app.digest.merkle import case_record, leaf_hash

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

ROLE = "evalbook_service"
# Retention clears outputs; nothing else about a stored case may change (its leaf binds it).
GRANTS = f"""
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{ROLE}') THEN
        REVOKE UPDATE ON cases FROM {ROLE};
        GRANT UPDATE (output, output_key, output_removed_at) ON cases TO {ROLE};
    END IF;
END
$$
"""
BACKFILL_ROWS = 10_000


def _backfill(connection: sa.Connection) -> None:
    """Leaves for cases stored before this revision (written by the ingest code from now on)."""
    evaluations = connection.execute(
        sa.text(
            "SELECT e.id, e.project_id, sv.content FROM evaluations e"
            " JOIN suite_versions sv ON sv.id = e.suite_version_id"
            " WHERE EXISTS (SELECT 1 FROM cases c WHERE c.evaluation_id = e.id)"
        )
    ).all()
    for evaluation_id, project_id, content in evaluations:
        scorer_of = {c["check_id"]: c["scorer"]["name"] for c in json.loads(content)["checks"]}
        digests = {
            (name, version): digest
            for name, version, digest in connection.execute(
                sa.text("SELECT name, version, digest FROM scorer_versions WHERE project_id = :p"),
                {"p": project_id},
            )
        }
        rows = connection.execute(
            sa.text(
                "SELECT check_id, example_id, repeat, status, score, output_digest, trace_digest,"
                " evidence_refs, assurance, scorer_version FROM cases WHERE evaluation_id = :e"
            ),
            {"e": evaluation_id},
        ).all()
        updates = [
            {
                "e": evaluation_id,
                "c": r.check_id,
                "x": r.example_id,
                "r": r.repeat,
                "leaf": leaf_hash(
                    case_record(
                        r.example_id,
                        r.repeat,
                        r.status,
                        r.score,
                        r.output_digest,
                        r.trace_digest,
                        r.evidence_refs,
                        r.assurance,
                        digests[(scorer_of[r.check_id], r.scorer_version)],
                    )
                ),
            }
            for r in rows
        ]
        for start in range(0, len(updates), BACKFILL_ROWS):
            connection.execute(
                sa.text(
                    "UPDATE cases SET leaf = :leaf WHERE evaluation_id = :e AND check_id = :c"
                    " AND example_id = :x AND repeat = :r"
                ),
                updates[start : start + BACKFILL_ROWS],
            )


def upgrade() -> None:
    op.add_column("cases", sa.Column("leaf", sa.LargeBinary(), nullable=True))
    _backfill(op.get_bind())
    op.alter_column("cases", "leaf", nullable=False)
    op.execute("ALTER TABLE cases ADD CONSTRAINT ck_cases_leaf CHECK (octet_length(leaf) = 32)")
    op.execute(GRANTS)


def downgrade() -> None:
    op.drop_column("cases", "leaf")
