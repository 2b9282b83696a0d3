"""reports

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-29
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "reports",
        sa.Column("id", sa.UUID(), nullable=False),
        sa.Column("project_id", sa.UUID(), nullable=False),
        sa.Column("evaluation_id", sa.UUID(), nullable=False),
        sa.Column("suite_id", sa.UUID(), nullable=False),
        sa.Column("suite_version_id", sa.UUID(), nullable=False),
        sa.Column("subject_digest", sa.Text(), nullable=False),
        sa.Column("mode", sa.Text(), nullable=False),
        sa.Column("result", sa.Text(), nullable=False),
        sa.Column("body", sa.LargeBinary(), nullable=False),
        sa.Column("digest", sa.Text(), nullable=False),
        sa.Column("issued_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("valid_until", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["evaluation_id"], ["evaluations.id"], name=op.f("fk_reports_evaluation_id_evaluations")
        ),
        sa.ForeignKeyConstraint(
            ["project_id"], ["projects.id"], name=op.f("fk_reports_project_id_projects")
        ),
        sa.ForeignKeyConstraint(
            ["suite_id"], ["suites.id"], name=op.f("fk_reports_suite_id_suites")
        ),
        sa.ForeignKeyConstraint(
            ["suite_version_id"],
            ["suite_versions.id"],
            name=op.f("fk_reports_suite_version_id_suite_versions"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_reports")),
        sa.UniqueConstraint("evaluation_id", name=op.f("uq_reports_evaluation_id")),
    )
    op.create_index(
        "ix_reports_project_issued", "reports", ["project_id", "issued_at", "id"], unique=False
    )
    op.create_table(
        "check_results",
        sa.Column("report_id", sa.UUID(), nullable=False),
        sa.Column("check_id", sa.Text(collation="C"), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("required", sa.Boolean(), nullable=False),
        sa.Column("status", sa.Text(), nullable=False),
        sa.Column("result", sa.Text(), nullable=False),
        sa.Column("score", sa.Double(), nullable=True),
        sa.ForeignKeyConstraint(
            ["report_id"], ["reports.id"], name=op.f("fk_check_results_report_id_reports")
        ),
        sa.PrimaryKeyConstraint("report_id", "check_id", name=op.f("pk_check_results")),
    )
    op.create_table(
        "evidence_manifests",
        sa.Column("report_id", sa.UUID(), nullable=False),
        sa.Column("check_id", sa.Text(collation="C"), nullable=False),
        sa.Column("manifest", sa.LargeBinary(), nullable=False),
        sa.Column("digest", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(
            ["report_id"], ["reports.id"], name=op.f("fk_evidence_manifests_report_id_reports")
        ),
        sa.PrimaryKeyConstraint("report_id", "check_id", name=op.f("pk_evidence_manifests")),
    )
    op.create_table(
        "incidents",
        sa.Column("id", sa.BigInteger(), autoincrement=True, nullable=False),
        sa.Column("project_id", sa.UUID(), nullable=False),
        sa.Column("report_id", sa.UUID(), nullable=False),
        sa.Column("kind", sa.Text(), nullable=False),
        sa.Column("stored_digest", sa.Text(), nullable=False),
        sa.Column("computed_digest", sa.Text(), nullable=False),
        sa.Column("detail", sa.Text(), nullable=False),
        sa.Column(
            "detected_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column("resolved_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["report_id"], ["reports.id"], name=op.f("fk_incidents_report_id_reports")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_incidents")),
    )
    op.create_index(
        "uq_incidents_open_report",
        "incidents",
        ["report_id"],
        unique=True,
        postgresql_where=sa.text("resolved_at IS NULL"),
    )
    op.create_table(
        "report_envelopes",
        sa.Column("report_id", sa.UUID(), nullable=False),
        sa.Column("project_id", sa.UUID(), nullable=False),
        sa.Column("suite_id", sa.UUID(), nullable=False),
        sa.Column("suite_version_id", sa.UUID(), nullable=False),
        sa.Column("subject_digest", sa.Text(), nullable=False),
        sa.Column("mode", sa.Text(), nullable=False),
        sa.Column("status", sa.Text(), nullable=False),
        sa.Column("superseded_by", sa.UUID(), nullable=True),
        sa.Column("superseded_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("superseded_reason", sa.Text(), nullable=True),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint(
            "status IN ('current', 'superseded')", name=op.f("ck_report_envelopes_status")
        ),
        sa.CheckConstraint(
            "superseded_reason IS NULL OR superseded_reason IN ('re_evaluation', 'suite_version_activated')",
            name=op.f("ck_report_envelopes_superseded_reason"),
        ),
        sa.ForeignKeyConstraint(
            ["report_id"], ["reports.id"], name=op.f("fk_report_envelopes_report_id_reports")
        ),
        sa.ForeignKeyConstraint(
            ["superseded_by"],
            ["reports.id"],
            name=op.f("fk_report_envelopes_superseded_by_reports"),
        ),
        sa.PrimaryKeyConstraint("report_id", name=op.f("pk_report_envelopes")),
    )
    op.create_index(
        "uq_report_envelopes_current_gate",
        "report_envelopes",
        ["project_id", "subject_digest", "suite_id"],
        unique=True,
        postgresql_where=sa.text("status = 'current' AND mode = 'gate'"),
    )

    op.create_index(
        "ix_report_envelopes_subject", "report_envelopes", ["project_id", "subject_digest"]
    )
    # Report rows are append-only whatever the application does: the database refuses any
    # UPDATE, DELETE or TRUNCATE of them.
    op.execute(APPEND_ONLY_FUNCTION)
    op.execute(
        "CREATE TRIGGER reports_append_only BEFORE UPDATE OR DELETE ON reports "
        "FOR EACH ROW EXECUTE FUNCTION evalbook_reports_append_only()"
    )
    op.execute(
        "CREATE TRIGGER reports_no_truncate BEFORE TRUNCATE ON reports "
        "FOR EACH STATEMENT EXECUTE FUNCTION evalbook_reports_append_only()"
    )


APPEND_ONLY_FUNCTION = """
CREATE FUNCTION evalbook_reports_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'reports are append-only: % refused', TG_OP
        USING ERRCODE = 'insufficient_privilege';
END;
$$
"""


def downgrade() -> None:
    op.execute("DROP TRIGGER IF EXISTS reports_no_truncate ON reports")
    op.execute("DROP TRIGGER IF EXISTS reports_append_only ON reports")
    op.execute("DROP FUNCTION IF EXISTS evalbook_reports_append_only()")
    op.drop_index("ix_report_envelopes_subject", table_name="report_envelopes")
    op.drop_index(
        "uq_report_envelopes_current_gate",
        table_name="report_envelopes",
        postgresql_where=sa.text("status = 'current' AND mode = 'gate'"),
    )
    op.drop_table("report_envelopes")
    op.drop_index(
        "uq_incidents_open_report",
        table_name="incidents",
        postgresql_where=sa.text("resolved_at IS NULL"),
    )
    op.drop_table("incidents")
    op.drop_table("evidence_manifests")
    op.drop_table("check_results")
    op.drop_index("ix_reports_project_issued", table_name="reports")
    op.drop_table("reports")
