"""announce token revocations (NOTIFY), so every process forgets its cached principals

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-30
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Delivered when the revoking transaction commits, whoever revokes (the service, or an operator
# with SQL); app/identity/revocations.py listens.
NOTIFY_FUNCTION = """
CREATE FUNCTION evalbook_announce_revocation() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('evalbook_revocations', NEW.id::text);
    RETURN NULL;
END;
$$
"""


def upgrade() -> None:
    op.execute(NOTIFY_FUNCTION)
    op.execute(
        "CREATE TRIGGER api_tokens_revoked AFTER UPDATE OF revoked_at ON api_tokens "
        "FOR EACH ROW WHEN (NEW.revoked_at IS NOT NULL AND OLD.revoked_at IS NULL) "
        "EXECUTE FUNCTION evalbook_announce_revocation()"
    )


def downgrade() -> None:
    op.execute("DROP TRIGGER IF EXISTS api_tokens_revoked ON api_tokens")
    op.execute("DROP FUNCTION IF EXISTS evalbook_announce_revocation()")
