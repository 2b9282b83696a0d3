"""transparency log: entries appended with each report and supersession, signed checkpoints,
witness cosignatures, and the log's note key; all append-only

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-03
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0020"
down_revision: str | None = "0019"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

ROLE = "evalbook_service"
TABLES = ("log_entries", "log_checkpoints", "log_cosignatures", "log_keys")

CREATE = """
CREATE TABLE log_entries (
    idx bigint PRIMARY KEY CHECK (idx >= 0),
    kind text NOT NULL CHECK (kind IN ('report', 'supersession')),
    report_id uuid NOT NULL,
    entry bytea NOT NULL,
    leaf bytea NOT NULL CHECK (octet_length(leaf) = 32),
    created_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (kind, report_id)
);
CREATE TABLE log_checkpoints (
    size bigint PRIMARY KEY CHECK (size >= 0),
    root bytea NOT NULL CHECK (octet_length(root) = 32),
    note bytea NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE log_cosignatures (
    size bigint NOT NULL REFERENCES log_checkpoints (size),
    witness text NOT NULL,
    line text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (size, witness)
);
CREATE TABLE log_keys (
    name text PRIMARY KEY,
    public_key bytea NOT NULL CHECK (octet_length(public_key) = 32),
    source_keyid text NOT NULL REFERENCES signing_keys (keyid),
    created_at timestamptz NOT NULL DEFAULT now()
);
"""


def upgrade() -> None:
    for statement in CREATE.split(";"):
        if statement.strip():
            op.execute(statement)
    for table in TABLES:
        op.execute(
            f"CREATE TRIGGER {table}_append_only BEFORE UPDATE OR DELETE ON {table} "
            "FOR EACH ROW EXECUTE FUNCTION evalbook_issued_append_only()"
        )
        op.execute(
            f"CREATE TRIGGER {table}_no_truncate BEFORE TRUNCATE ON {table} "
            "FOR EACH STATEMENT EXECUTE FUNCTION evalbook_issued_append_only()"
        )
    op.execute(
        f"DO $$ BEGIN IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{ROLE}') THEN "
        f"GRANT SELECT, INSERT ON {', '.join(TABLES)} TO {ROLE}; END IF; END $$"
    )


def downgrade() -> None:
    for table in reversed(TABLES):
        op.execute(f"DROP TABLE IF EXISTS {table}")
