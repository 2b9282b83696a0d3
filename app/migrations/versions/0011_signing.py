"""signing keys, report and supersession attestations (append-only)

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-30
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

ROLE = "evalbook_service"
# A key is registered active and retired once; it is never removed (it verifies what it signed).
KEY_TRANSITION = """
CREATE FUNCTION evalbook_signing_key_transition() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.status <> 'active' OR NEW.status <> 'retired' OR NEW.retired_at IS NULL
       OR (NEW.keyid, NEW.public_key, NEW.created_at)
          IS DISTINCT FROM (OLD.keyid, OLD.public_key, OLD.created_at) THEN
        RAISE EXCEPTION 'signing_keys: only active -> retired, once'
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN NEW;
END;
$$
"""
GRANTS = f"""
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{ROLE}') THEN
        GRANT SELECT, INSERT, UPDATE ON signing_keys TO {ROLE};
        GRANT SELECT, INSERT ON report_attestations, supersession_attestations TO {ROLE};
    END IF;
END
$$
"""


def upgrade() -> None:
    op.create_table(
        "signing_keys",
        sa.Column("keyid", sa.Text(), primary_key=True),
        sa.Column("public_key", sa.LargeBinary(), nullable=False),
        sa.Column("status", sa.Text(), nullable=False),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.Column("retired_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint("status IN ('active', 'retired')", name="ck_signing_keys_status"),
        sa.CheckConstraint("length(public_key) = 32", name="ck_signing_keys_length"),
    )
    op.execute(
        "CREATE UNIQUE INDEX ux_signing_keys_one_active ON signing_keys ((true)) "
        "WHERE status = 'active'"
    )
    op.create_table(
        "report_attestations",
        sa.Column("report_id", sa.UUID(), sa.ForeignKey("reports.id"), primary_key=True),
        sa.Column("keyid", sa.Text(), sa.ForeignKey("signing_keys.keyid"), nullable=False),
        sa.Column("envelope", sa.LargeBinary(), nullable=False),
        sa.Column("digest", sa.Text(), nullable=False),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
    )
    op.create_table(
        "supersession_attestations",
        sa.Column("report_id", sa.UUID(), sa.ForeignKey("reports.id"), primary_key=True),
        sa.Column("keyid", sa.Text(), sa.ForeignKey("signing_keys.keyid"), nullable=False),
        sa.Column("envelope", sa.LargeBinary(), nullable=False),
        sa.Column("digest", sa.Text(), nullable=False),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
    )
    op.execute(KEY_TRANSITION)
    op.execute(
        "CREATE TRIGGER signing_keys_transition BEFORE UPDATE ON signing_keys "
        "FOR EACH ROW EXECUTE FUNCTION evalbook_signing_key_transition()"
    )
    for table in ("signing_keys", "report_attestations", "supersession_attestations"):
        op.execute(
            f"CREATE TRIGGER {table}_no_delete BEFORE DELETE ON {table} "
            "FOR EACH ROW EXECUTE FUNCTION evalbook_issued_append_only()"
        )
        op.execute(
            f"CREATE TRIGGER {table}_no_truncate BEFORE TRUNCATE ON {table} "
            "FOR EACH STATEMENT EXECUTE FUNCTION evalbook_issued_append_only()"
        )
    for table in ("report_attestations", "supersession_attestations"):
        op.execute(
            f"CREATE TRIGGER {table}_append_only BEFORE UPDATE ON {table} "
            "FOR EACH ROW EXECUTE FUNCTION evalbook_issued_append_only()"
        )
    op.execute(GRANTS)


def downgrade() -> None:
    op.drop_table("supersession_attestations")
    op.drop_table("report_attestations")
    op.drop_table("signing_keys")
    op.execute("DROP FUNCTION evalbook_signing_key_transition()")
