"""issued data frozen: cases, examples, versions, bundles and tokens change only as retention
and revocation change them (column grants for the service role, triggers for everyone)

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-02
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0019"
down_revision: str | None = "0018"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

ROLE = "evalbook_service"

# Per table: the columns an UPDATE may change, and how (`clear`: to NULL, never to another
# value; `stamp`: from NULL to a time, once; `any`: freely). Every other column is frozen.
MUTABLE: dict[str, dict[str, str]] = {
    "cases": {"output": "clear", "output_key": "clear", "output_removed_at": "stamp"},
    "examples": {"body": "clear", "body_removed_at": "stamp"},
    "scorer_versions": {"retired_at": "stamp"},
    "dataset_versions": {},
    "suite_versions": {"activated_at": "stamp"},
    "suites": {"active_version_id": "any"},
    "api_tokens": {"revoked_at": "stamp"},
    "evaluations": {"status": "any", "finished_at": "stamp"},
    "bundles": {},
    "case_outputs": {},
}
# Rows that may be deleted: an evaluation's cases until it has a report (nothing does so
# today); retention deletes outputs kept apart from their case. Nothing else.
DELETABLE_UNLESS_ISSUED = ("cases",)
DELETABLE = ("case_outputs",)


def _rule(table: str) -> str:
    """The body of a row trigger refusing any change but those MUTABLE allows."""
    columns = MUTABLE[table]
    kept = "".join(f" - '{c}'" for c in columns)
    checks = [f"(to_jsonb(NEW){kept}) IS DISTINCT FROM (to_jsonb(OLD){kept})"]
    for column, how in columns.items():
        if how == "clear":
            checks.append(
                f"(NEW.{column} IS DISTINCT FROM OLD.{column} AND NEW.{column} IS NOT NULL)"
            )
        elif how == "stamp":
            checks.append(
                f"(NEW.{column} IS DISTINCT FROM OLD.{column}"
                f" AND (OLD.{column} IS NOT NULL OR NEW.{column} IS NULL))"
            )
    if table in DELETABLE:
        on_delete = "RETURN OLD;"
    elif table in DELETABLE_UNLESS_ISSUED:
        on_delete = (
            "IF EXISTS (SELECT 1 FROM reports r WHERE r.evaluation_id = OLD.evaluation_id) THEN "
            f"RAISE EXCEPTION '{table} of an issued report are append-only: DELETE refused' "
            "USING ERRCODE = 'insufficient_privilege'; END IF; RETURN OLD;"
        )
    else:
        on_delete = (
            f"RAISE EXCEPTION '{table} is append-only: DELETE refused' "
            "USING ERRCODE = 'insufficient_privilege';"
        )
    allowed = ", ".join(columns) or "nothing"
    return f"""
CREATE FUNCTION evalbook_frozen_{table}() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        {on_delete}
    END IF;
    IF {" OR ".join(checks)} THEN
        RAISE EXCEPTION '{table} is frozen once written: an UPDATE may change {allowed} only'
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN NEW;
END;
$$
"""


def _grants() -> str:
    statements = []
    for table, columns in MUTABLE.items():
        statements.append(f"REVOKE UPDATE, DELETE, TRUNCATE ON {table} FROM {ROLE};")
        if columns:
            statements.append(f"GRANT UPDATE ({', '.join(columns)}) ON {table} TO {ROLE};")
    statements.append(f"GRANT DELETE ON case_outputs TO {ROLE};")
    body = "\n        ".join(statements)
    return f"""
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{ROLE}') THEN
        {body}
    END IF;
END
$$
"""


def upgrade() -> None:
    for table in MUTABLE:
        op.execute(_rule(table))
        op.execute(
            f"CREATE TRIGGER {table}_frozen BEFORE UPDATE OR DELETE ON {table} "
            f"FOR EACH ROW EXECUTE FUNCTION evalbook_frozen_{table}()"
        )
        op.execute(
            # The refusal of migration 0007 ("<table> is append-only: TRUNCATE refused").
            f"CREATE TRIGGER {table}_no_truncate BEFORE TRUNCATE ON {table} "
            "FOR EACH STATEMENT EXECUTE FUNCTION evalbook_issued_append_only()"
        )
    op.execute(_grants())


def downgrade() -> None:
    for table in MUTABLE:
        op.execute(f"DROP TRIGGER IF EXISTS {table}_no_truncate ON {table}")
        op.execute(f"DROP TRIGGER IF EXISTS {table}_frozen ON {table}")
        op.execute(f"DROP FUNCTION IF EXISTS evalbook_frozen_{table}()")
    op.execute(
        f"DO $$ BEGIN IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{ROLE}') THEN "
        f"GRANT UPDATE ON api_tokens, evaluations, examples, scorer_versions, suite_versions, "
        f"suites TO {ROLE}; END IF; END $$"
    )
