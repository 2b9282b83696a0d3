"""indexes for the report lists (newest first within a subject, within a suite); evidence
manifests compressed with lz4 where the server has it, else stored uncompressed

A large check's manifest is tens of megabytes of hex digests: pglz (the default) takes seconds
to compress it at finish, lz4 a few hundred milliseconds for the same ratio.

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-30
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


MANIFEST_COMPRESSION = """
DO $$
BEGIN
    ALTER TABLE evidence_manifests ALTER COLUMN manifest SET COMPRESSION lz4;
EXCEPTION WHEN feature_not_supported THEN
    ALTER TABLE evidence_manifests ALTER COLUMN manifest SET STORAGE EXTERNAL;
END
$$
"""


def upgrade() -> None:
    op.execute(MANIFEST_COMPRESSION)
    op.create_index(
        "ix_reports_project_subject_issued",
        "reports",
        ["project_id", "subject_digest", "issued_at", "id"],
    )
    op.create_index(
        "ix_reports_project_suite_issued", "reports", ["project_id", "suite_id", "issued_at", "id"]
    )


def downgrade() -> None:
    op.execute("ALTER TABLE evidence_manifests ALTER COLUMN manifest SET COMPRESSION default")
    op.execute("ALTER TABLE evidence_manifests ALTER COLUMN manifest SET STORAGE EXTENDED")
    op.drop_index("ix_reports_project_suite_issued", table_name="reports")
    op.drop_index("ix_reports_project_subject_issued", table_name="reports")
