"""foundation

Revision ID: 0001
Revises:
Create Date: 2026-11-29
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "organizations",
        sa.Column("id", sa.UUID(), nullable=False),
        sa.Column("slug", sa.Text(), nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_organizations")),
        sa.UniqueConstraint("slug", name=op.f("uq_organizations_slug")),
    )
    op.create_table(
        "projects",
        sa.Column("id", sa.UUID(), nullable=False),
        sa.Column("organization_id", sa.UUID(), nullable=False),
        sa.Column("slug", sa.Text(), nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.ForeignKeyConstraint(
            ["organization_id"],
            ["organizations.id"],
            name=op.f("fk_projects_organization_id_organizations"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_projects")),
        sa.UniqueConstraint(
            "organization_id", "slug", name=op.f("uq_projects_organization_id_slug")
        ),
    )
    op.create_table(
        "api_tokens",
        sa.Column("id", sa.UUID(), nullable=False),
        sa.Column("project_id", sa.UUID(), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("secret_hash", sa.LargeBinary(), nullable=False),
        sa.Column("kind", sa.Text(), nullable=False),
        sa.Column("permissions", postgresql.ARRAY(sa.Text()), nullable=False),
        sa.Column("assurance_cap", sa.Text(), nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["project_id"], ["projects.id"], name=op.f("fk_api_tokens_project_id_projects")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_api_tokens")),
        sa.UniqueConstraint("secret_hash", name=op.f("uq_api_tokens_secret_hash")),
    )
    op.create_index(op.f("ix_api_tokens_project_id"), "api_tokens", ["project_id"], unique=False)
    op.create_table(
        "dataset_versions",
        sa.Column("id", sa.UUID(), nullable=False),
        sa.Column("project_id", sa.UUID(), nullable=False),
        sa.Column("name", sa.Text(collation="C"), nullable=False),
        sa.Column("version", sa.Text(collation="C"), nullable=False),
        sa.Column("digest", sa.Text(), nullable=False),
        sa.Column("example_count", sa.Integer(), nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.ForeignKeyConstraint(
            ["project_id"], ["projects.id"], name=op.f("fk_dataset_versions_project_id_projects")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_dataset_versions")),
        sa.UniqueConstraint(
            "project_id",
            "name",
            "version",
            name=op.f("uq_dataset_versions_project_id_name_version"),
        ),
    )
    op.create_table(
        "scorer_versions",
        sa.Column("id", sa.UUID(), nullable=False),
        sa.Column("project_id", sa.UUID(), nullable=False),
        sa.Column("name", sa.Text(collation="C"), nullable=False),
        sa.Column("version", sa.Text(collation="C"), nullable=False),
        sa.Column("definition", sa.Text(), nullable=False),
        sa.Column("score_lo", sa.Double(), nullable=True),
        sa.Column("score_hi", sa.Double(), nullable=True),
        sa.Column("digest", sa.Text(), nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column("retired_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["project_id"], ["projects.id"], name=op.f("fk_scorer_versions_project_id_projects")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_scorer_versions")),
        sa.UniqueConstraint(
            "project_id", "name", "version", name=op.f("uq_scorer_versions_project_id_name_version")
        ),
    )
    op.create_table(
        "suites",
        sa.Column("id", sa.UUID(), nullable=False),
        sa.Column("project_id", sa.UUID(), nullable=False),
        sa.Column("name", sa.Text(collation="C"), nullable=False),
        sa.Column("active_version_id", sa.UUID(), nullable=True),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.ForeignKeyConstraint(
            ["project_id"], ["projects.id"], name=op.f("fk_suites_project_id_projects")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_suites")),
        sa.UniqueConstraint("project_id", "name", name=op.f("uq_suites_project_id_name")),
    )
    op.create_table(
        "examples",
        sa.Column("dataset_version_id", sa.UUID(), nullable=False),
        sa.Column("example_id", sa.Text(collation="C"), nullable=False),
        sa.Column("body", sa.Text(), nullable=True),
        sa.Column("body_digest", sa.Text(), nullable=False),
        sa.Column("tags", postgresql.ARRAY(sa.Text()), nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column("body_removed_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["dataset_version_id"],
            ["dataset_versions.id"],
            name=op.f("fk_examples_dataset_version_id_dataset_versions"),
        ),
        sa.PrimaryKeyConstraint("dataset_version_id", "example_id", name=op.f("pk_examples")),
    )
    op.create_table(
        "suite_versions",
        sa.Column("id", sa.UUID(), nullable=False),
        sa.Column("suite_id", sa.UUID(), nullable=False),
        sa.Column("project_id", sa.UUID(), nullable=False),
        sa.Column("version", sa.Text(collation="C"), nullable=False),
        sa.Column("content", sa.Text(), nullable=False),
        sa.Column("digest", sa.Text(), nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column("activated_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["project_id"], ["projects.id"], name=op.f("fk_suite_versions_project_id_projects")
        ),
        sa.ForeignKeyConstraint(
            ["suite_id"], ["suites.id"], name=op.f("fk_suite_versions_suite_id_suites")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_suite_versions")),
        sa.UniqueConstraint("suite_id", "version", name=op.f("uq_suite_versions_suite_id_version")),
    )
    # suites and suite_versions reference each other: the active-version key comes last.
    op.create_foreign_key(
        "fk_suites_active_version", "suites", "suite_versions", ["active_version_id"], ["id"]
    )
    op.create_table(
        "evaluations",
        sa.Column("id", sa.UUID(), nullable=False),
        sa.Column("project_id", sa.UUID(), nullable=False),
        sa.Column("suite_version_id", sa.UUID(), nullable=False),
        sa.Column("subject", sa.Text(), nullable=False),
        sa.Column("subject_digest", sa.Text(), nullable=False),
        sa.Column("mode", sa.Text(), nullable=False),
        sa.Column("execution_mode", sa.Text(), nullable=False),
        sa.Column("baseline_evaluation_id", sa.UUID(), nullable=True),
        sa.Column("status", sa.Text(), nullable=False),
        sa.Column("idempotency_key", sa.Text(), nullable=True),
        sa.Column("request_digest", sa.Text(), nullable=False),
        sa.Column("created_by_token_id", sa.UUID(), nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint(
            "execution_mode IN ('platform', 'external', 'local')",
            name=op.f("ck_evaluations_execution_mode"),
        ),
        sa.CheckConstraint(
            "mode IN ('gate', 'experiment', 'exploratory')", name=op.f("ck_evaluations_mode")
        ),
        sa.CheckConstraint(
            "status IN ('running', 'finished', 'cancelled')", name=op.f("ck_evaluations_status")
        ),
        sa.ForeignKeyConstraint(
            ["baseline_evaluation_id"],
            ["evaluations.id"],
            name=op.f("fk_evaluations_baseline_evaluation_id_evaluations"),
        ),
        sa.ForeignKeyConstraint(
            ["created_by_token_id"],
            ["api_tokens.id"],
            name=op.f("fk_evaluations_created_by_token_id_api_tokens"),
        ),
        sa.ForeignKeyConstraint(
            ["project_id"], ["projects.id"], name=op.f("fk_evaluations_project_id_projects")
        ),
        sa.ForeignKeyConstraint(
            ["suite_version_id"],
            ["suite_versions.id"],
            name=op.f("fk_evaluations_suite_version_id_suite_versions"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_evaluations")),
        sa.UniqueConstraint(
            "project_id", "idempotency_key", name=op.f("uq_evaluations_project_id_idempotency_key")
        ),
    )
    op.create_index(op.f("ix_evaluations_project_id"), "evaluations", ["project_id"], unique=False)
    op.create_index(
        op.f("ix_evaluations_subject_digest"), "evaluations", ["subject_digest"], unique=False
    )
    op.create_table(
        "cases",
        sa.Column("evaluation_id", sa.UUID(), nullable=False),
        sa.Column("check_id", sa.Text(collation="C"), nullable=False),
        sa.Column("example_id", sa.Text(collation="C"), nullable=False),
        sa.Column("repeat", sa.Integer(), nullable=False),
        sa.Column("status", sa.Text(), nullable=False),
        sa.Column("score", sa.Double(), nullable=True),
        sa.Column("output", sa.Text(), nullable=True),
        sa.Column("output_digest", sa.Text(), nullable=True),
        sa.Column("output_key", sa.Text(), nullable=True),
        sa.Column("evidence_refs", postgresql.ARRAY(sa.Text()), nullable=True),
        sa.Column("trace_id", sa.Text(), nullable=True),
        sa.Column("trace_digest", sa.Text(), nullable=True),
        sa.Column("scorer_version", sa.Text(collation="C"), nullable=False),
        sa.Column("assurance", sa.Text(), nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column("output_removed_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint(
            "assurance IN ('development_unisolated', 'reported', 'independently_observed', 'human_attested', 'platform_verified')",
            name=op.f("ck_cases_assurance"),
        ),
        sa.CheckConstraint(
            "status IN ('pass', 'fail', 'error', 'timeout', 'cancelled', 'skipped', 'unsupported', 'abstained')",
            name=op.f("ck_cases_status"),
        ),
        sa.CheckConstraint("repeat >= 0", name=op.f("ck_cases_repeat")),
        sa.PrimaryKeyConstraint(
            "evaluation_id", "check_id", "example_id", "repeat", name=op.f("pk_cases")
        ),
    )


def downgrade() -> None:
    op.drop_table("cases")
    op.drop_index(op.f("ix_evaluations_subject_digest"), table_name="evaluations")
    op.drop_index(op.f("ix_evaluations_project_id"), table_name="evaluations")
    op.drop_table("evaluations")
    op.drop_constraint("fk_suites_active_version", "suites", type_="foreignkey")
    op.drop_table("suite_versions")
    op.drop_table("examples")
    op.drop_table("suites")
    op.drop_table("scorer_versions")
    op.drop_table("dataset_versions")
    op.drop_index(op.f("ix_api_tokens_project_id"), table_name="api_tokens")
    op.drop_table("api_tokens")
    op.drop_table("projects")
    op.drop_table("organizations")
