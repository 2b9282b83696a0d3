"""the service's database role: only the grants it needs

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-30
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

ROLE = "evalbook_service"
# What the service changes after insert. Issued reports (reports, check_results,
# evidence_manifests) are not here: the service may only add them. Row locks (FOR UPDATE,
# FOR SHARE) need UPDATE too, hence evaluations, suites and notifications.
UPDATABLE = (
    "api_tokens",
    "cases",
    "evaluations",
    "examples",
    "incidents",
    "notifications",
    "peers",
    "report_envelopes",
    "report_verifications",
    "scorer_versions",
    "suite_versions",
    "suites",
    "web_sessions",
)

# Roles belong to the cluster, not the database: made once (when the migrating role may), and
# granted in every database the migrations run in. Without CREATEROLE the operator makes it
# (README, "Database roles").
CREATE_ROLE = f"""
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{ROLE}') THEN
        BEGIN
            CREATE ROLE {ROLE} NOLOGIN;
        EXCEPTION WHEN insufficient_privilege THEN
            RAISE NOTICE 'cannot create role {ROLE}: create it, then migrate again';
        END;
    END IF;
END
$$
"""

GRANTS = f"""
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{ROLE}') THEN
        EXECUTE format('GRANT CONNECT, TEMPORARY ON DATABASE %I TO {ROLE}', current_database());
        GRANT USAGE ON SCHEMA public TO {ROLE};
        GRANT SELECT, INSERT ON ALL TABLES IN SCHEMA public TO {ROLE};
        GRANT UPDATE ON {", ".join(UPDATABLE)} TO {ROLE};
        GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO {ROLE};
        REVOKE ALL ON alembic_version FROM {ROLE};
    END IF;
END
$$
"""


def upgrade() -> None:
    op.execute(CREATE_ROLE)
    op.execute(GRANTS)


def downgrade() -> None:
    op.execute(
        f"DO $$ BEGIN IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{ROLE}') THEN "
        f"REVOKE ALL ON ALL TABLES IN SCHEMA public FROM {ROLE}; "
        f"REVOKE ALL ON ALL SEQUENCES IN SCHEMA public FROM {ROLE}; "
        f"REVOKE ALL ON SCHEMA public FROM {ROLE}; END IF; END $$"
    )
