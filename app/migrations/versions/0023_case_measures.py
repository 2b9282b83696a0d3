"""case measures: a case may carry up to 16 named measures (cost, latency, tokens), kept as the
canonical JSON its leaf commits to

Revision ID: 0023
Revises: 0022
Create Date: 2026-12-05
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0023"
down_revision: str | None = "0022"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Add the nullable `measures` column (NULL: the case carries none)."""
    # Text, not jsonb: the bytes are the canonical JSON the case's leaf commits to, so every
    # reader rebuilds the leaf from them as they are; jsonb would reorder and reformat them.
    op.execute("ALTER TABLE cases ADD COLUMN measures text")


def downgrade() -> None:
    """Drop the column."""
    op.execute("ALTER TABLE cases DROP COLUMN measures")
