"""bundles

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-29
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "bundles",
        sa.Column("id", sa.UUID(), nullable=False),
        sa.Column("project_id", sa.UUID(), nullable=False),
        sa.Column("report_id", sa.UUID(), nullable=False),
        sa.Column("digest", sa.Text(), nullable=False),
        sa.Column("size_bytes", sa.BigInteger(), nullable=False),
        sa.Column("object_key", sa.Text(), nullable=False),
        sa.Column("media_type", sa.Text(), nullable=False),
        sa.Column("created_by", sa.Text(), nullable=False),
        sa.Column("created_by_token_id", sa.UUID(), nullable=False),
        sa.Column("unavailable_count", sa.Integer(), nullable=False),
        sa.Column("redacted_count", sa.Integer(), nullable=False),
        sa.Column("holds_bodies", sa.Boolean(), nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.ForeignKeyConstraint(
            ["created_by_token_id"],
            ["api_tokens.id"],
            name=op.f("fk_bundles_created_by_token_id_api_tokens"),
        ),
        sa.ForeignKeyConstraint(
            ["project_id"], ["projects.id"], name=op.f("fk_bundles_project_id_projects")
        ),
        sa.ForeignKeyConstraint(
            ["report_id"], ["reports.id"], name=op.f("fk_bundles_report_id_reports")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_bundles")),
        sa.UniqueConstraint("object_key", name=op.f("uq_bundles_object_key")),
    )
    op.create_index(
        "ix_bundles_project_created", "bundles", ["project_id", "created_at", "id"], unique=False
    )
    op.create_index("ix_bundles_report", "bundles", ["report_id"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_bundles_report", table_name="bundles")
    op.drop_index("ix_bundles_project_created", table_name="bundles")
    op.drop_table("bundles")
