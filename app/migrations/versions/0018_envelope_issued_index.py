"""report envelopes in issue order per project: (project, issued_at, report_id)

A list page read anew is read as versions (app/services/kit/report_items.py): each report's id, its
envelope row's version and whether it has an open incident. Filtered by status it is read from
the status indexes of 0015; unfiltered (or by mode) it is read from this one, from the envelopes
alone, rather than walking the reports' (project, issued_at) index and looking up each one's
envelope.

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-01
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0018"
down_revision: str | None = "0017"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index(
        "ix_report_envelopes_project_issued",
        "report_envelopes",
        ["project_id", "issued_at", "report_id"],
    )


def downgrade() -> None:
    op.drop_index("ix_report_envelopes_project_issued", table_name="report_envelopes")
