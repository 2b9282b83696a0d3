"""when each report was last verified (the background sweep's bookkeeping)

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-30
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "report_verifications",
        sa.Column("report_id", sa.UUID(), sa.ForeignKey("reports.id"), primary_key=True),
        sa.Column("verified_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("verified", sa.Boolean(), nullable=False),
    )
    op.create_index("ix_report_verifications_at", "report_verifications", ["verified_at"])


def downgrade() -> None:
    op.drop_index("ix_report_verifications_at", table_name="report_verifications")
    op.drop_table("report_verifications")
