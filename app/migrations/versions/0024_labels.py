"""labels: human labels of judged checks (docs/judges.md), one per (evaluation, check, example),
taken while the evaluation runs and frozen afterwards

Revision ID: 0024
Revises: 0023
Create Date: 2026-12-05
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0024"
down_revision: str | None = "0023"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

ROLE = "evalbook_service"

SCHEMA = """
CREATE TABLE labels (
    evaluation_id uuid NOT NULL REFERENCES evaluations (id),
    check_id text NOT NULL CHECK (length(check_id) BETWEEN 1 AND 200),
    example_id text NOT NULL CHECK (length(example_id) BETWEEN 1 AND 200),
    -- The label as its leaf commits to it: canonical JSON ("pass", "fail" or a number).
    label text NOT NULL,
    value double precision NOT NULL CHECK (value = value AND abs(value) < 'Infinity'),
    labeller text NOT NULL CHECK (length(labeller) BETWEEN 1 AND 200),
    note text CHECK (length(note) <= 2000),
    assurance text NOT NULL CHECK (assurance IN ('human_attested', 'platform_verified')),
    token_id uuid NOT NULL REFERENCES api_tokens (id),
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (evaluation_id, check_id, example_id)
)
"""

# A label is taken only while its evaluation runs: the same rule the service applies to cases
# (under the evaluation's share lock), held by the database as well.
RUNNING_ONLY = """
CREATE FUNCTION evalbook_labels_while_running() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (
        SELECT 1 FROM evaluations e WHERE e.id = NEW.evaluation_id AND e.status = 'running'
    ) THEN
        RAISE EXCEPTION 'labels are taken while the evaluation runs; it is finished'
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN NEW;
END
$$
"""

# Labels never change once written; none is deleted once the evaluation has a report.
FROZEN = """
CREATE FUNCTION evalbook_frozen_labels() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        IF EXISTS (SELECT 1 FROM reports r WHERE r.evaluation_id = OLD.evaluation_id) THEN
            RAISE EXCEPTION 'labels of an issued report are append-only: DELETE refused'
                USING ERRCODE = 'insufficient_privilege';
        END IF;
        RETURN OLD;
    END IF;
    RAISE EXCEPTION 'labels is frozen once written: an UPDATE may change nothing'
        USING ERRCODE = 'insufficient_privilege';
END
$$
"""


def upgrade() -> None:
    """The table, its two triggers, and the service role's grants."""
    op.execute(SCHEMA)
    op.execute(RUNNING_ONLY)
    op.execute(
        "CREATE TRIGGER labels_while_running BEFORE INSERT ON labels "
        "FOR EACH ROW EXECUTE FUNCTION evalbook_labels_while_running()"
    )
    op.execute(FROZEN)
    op.execute(
        "CREATE TRIGGER labels_frozen BEFORE UPDATE OR DELETE ON labels "
        "FOR EACH ROW EXECUTE FUNCTION evalbook_frozen_labels()"
    )
    op.execute(
        "CREATE TRIGGER labels_no_truncate BEFORE TRUNCATE ON labels "
        "FOR EACH STATEMENT EXECUTE FUNCTION evalbook_issued_append_only()"
    )
    op.execute(
        f"DO $$ BEGIN IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{ROLE}') THEN "
        f"GRANT SELECT, INSERT ON labels TO {ROLE}; END IF; END $$"
    )


def downgrade() -> None:
    """Drop the table and its functions."""
    op.execute("DROP TABLE IF EXISTS labels")
    op.execute("DROP FUNCTION IF EXISTS evalbook_labels_while_running()")
    op.execute("DROP FUNCTION IF EXISTS evalbook_frozen_labels()")
