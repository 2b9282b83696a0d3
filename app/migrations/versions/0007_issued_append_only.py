"""issued reports append-only: check results, manifests, envelope transitions

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-30
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# What a report issued with it stays: its check results and evidence manifests are never
# changed or removed; its envelope changes once, from current to superseded, setting the
# supersession fields that one time.
APPEND_ONLY_FUNCTION = """
CREATE FUNCTION evalbook_issued_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION '% is append-only: % refused', TG_TABLE_NAME, TG_OP
        USING ERRCODE = 'insufficient_privilege';
END;
$$
"""

ENVELOPE_FUNCTION = """
CREATE FUNCTION evalbook_envelope_transition() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.status <> 'current' OR NEW.status <> 'superseded' THEN
        RAISE EXCEPTION 'report_envelopes: only current -> superseded, once (% -> %)',
            OLD.status, NEW.status USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF (NEW.report_id, NEW.project_id, NEW.suite_id, NEW.suite_version_id,
        NEW.subject_digest, NEW.mode, NEW.expires_at)
       IS DISTINCT FROM
       (OLD.report_id, OLD.project_id, OLD.suite_id, OLD.suite_version_id,
        OLD.subject_digest, OLD.mode, OLD.expires_at) THEN
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

APPEND_ONLY_TABLES = ("check_results", "evidence_manifests")


def upgrade() -> None:
    op.execute(APPEND_ONLY_FUNCTION)
    op.execute(ENVELOPE_FUNCTION)
    for table in APPEND_ONLY_TABLES:
        op.execute(
            f"CREATE TRIGGER {table}_append_only BEFORE UPDATE OR DELETE ON {table} "
            "FOR EACH ROW EXECUTE FUNCTION evalbook_issued_append_only()"
        )
    for table in (*APPEND_ONLY_TABLES, "report_envelopes"):
        op.execute(
            f"CREATE TRIGGER {table}_no_truncate BEFORE TRUNCATE ON {table} "
            "FOR EACH STATEMENT EXECUTE FUNCTION evalbook_issued_append_only()"
        )
    op.execute(
        "CREATE TRIGGER report_envelopes_no_delete BEFORE DELETE ON report_envelopes "
        "FOR EACH ROW EXECUTE FUNCTION evalbook_issued_append_only()"
    )
    op.execute(
        "CREATE TRIGGER report_envelopes_transition BEFORE UPDATE ON report_envelopes "
        "FOR EACH ROW EXECUTE FUNCTION evalbook_envelope_transition()"
    )


def downgrade() -> None:
    op.execute("DROP TRIGGER IF EXISTS report_envelopes_transition ON report_envelopes")
    op.execute("DROP TRIGGER IF EXISTS report_envelopes_no_delete ON report_envelopes")
    for table in (*APPEND_ONLY_TABLES, "report_envelopes"):
        op.execute(f"DROP TRIGGER IF EXISTS {table}_no_truncate ON {table}")
    for table in APPEND_ONLY_TABLES:
        op.execute(f"DROP TRIGGER IF EXISTS {table}_append_only ON {table}")
    op.execute("DROP FUNCTION IF EXISTS evalbook_envelope_transition()")
    op.execute("DROP FUNCTION IF EXISTS evalbook_issued_append_only()")
