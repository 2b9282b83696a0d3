"""report envelopes carry their report's issued_at, and the lists filtered by status are served
from indexes on envelopes (project, [suite,] status, issued_at, report_id)

A list of current reports used to walk a suite's reports newest first and look up each one's
envelope, skipping the superseded ones: its cost grew with a suite's history. An envelope's
issued_at is its report's (immutable, like the rest of an envelope but its supersession); the
transition trigger now holds it fixed too.

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-01
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0015"
down_revision: str | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TRANSITION = """
CREATE OR REPLACE FUNCTION evalbook_envelope_transition() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.status <> 'current' OR NEW.status <> 'superseded' THEN
        RAISE EXCEPTION 'report_envelopes: only current -> superseded, once (% -> %)',
            OLD.status, NEW.status USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF (NEW.report_id, NEW.project_id, NEW.suite_id, NEW.suite_version_id,
        NEW.subject_digest, NEW.mode, NEW.expires_at{issued_new})
       IS DISTINCT FROM
       (OLD.report_id, OLD.project_id, OLD.suite_id, OLD.suite_version_id,
        OLD.subject_digest, OLD.mode, OLD.expires_at{issued_old}) THEN
        RAISE EXCEPTION 'report_envelopes: only the supersession fields change'
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF OLD.superseded_by IS NOT NULL OR OLD.superseded_at IS NOT NULL
       OR OLD.superseded_reason IS NOT NULL
       OR NEW.superseded_at IS NULL OR NEW.superseded_reason IS NULL THEN
        RAISE EXCEPTION 'report_envelopes: the supersession fields are set once, together'
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN NEW;
END;
$$
"""


def upgrade() -> None:
    op.execute("ALTER TABLE report_envelopes ADD COLUMN issued_at timestamptz")
    # The backfill is the one update the transition trigger must not judge.
    op.execute("ALTER TABLE report_envelopes DISABLE TRIGGER report_envelopes_transition")
    op.execute(
        "UPDATE report_envelopes e SET issued_at = r.issued_at FROM reports r"
        " WHERE r.id = e.report_id"
    )
    op.execute("ALTER TABLE report_envelopes ENABLE TRIGGER report_envelopes_transition")
    op.execute("ALTER TABLE report_envelopes ALTER COLUMN issued_at SET NOT NULL")
    op.execute(TRANSITION.format(issued_new=", NEW.issued_at", issued_old=", OLD.issued_at"))
    op.create_index(
        "ix_report_envelopes_project_status_issued",
        "report_envelopes",
        ["project_id", "status", "issued_at", "report_id"],
    )
    op.create_index(
        "ix_report_envelopes_project_suite_status_issued",
        "report_envelopes",
        ["project_id", "suite_id", "status", "issued_at", "report_id"],
    )


def downgrade() -> None:
    op.drop_index("ix_report_envelopes_project_suite_status_issued", table_name="report_envelopes")
    op.drop_index("ix_report_envelopes_project_status_issued", table_name="report_envelopes")
    op.execute(TRANSITION.format(issued_new="", issued_old=""))
    op.execute("ALTER TABLE report_envelopes DROP COLUMN issued_at")
