"""a stamp per project that moves whenever what its report lists show may have changed

A report list page is a function of the project's envelopes (issued, superseded) and open
incidents. Each committed change to either bumps the project's stamp, by a trigger deferred to
commit (so concurrent issuers in one project hold the stamp's row only while they commit). The
service caches rendered list pages under the stamp it read before reading the page, so a page is
served again only while nothing it shows has changed (app/services/kit/list_cache.py). The
function runs as its owner: the service role may read the stamps but not set them.

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-01
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0016"
down_revision: str | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

ROLE = "evalbook_service"

BUMP = """
CREATE FUNCTION evalbook_bump_list_stamp() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
DECLARE
    project uuid := CASE WHEN TG_OP = 'DELETE' THEN OLD.project_id ELSE NEW.project_id END;
BEGIN
    IF project IS NOT NULL THEN
        INSERT INTO report_list_stamps AS s (project_id, stamp) VALUES (project, 1)
        ON CONFLICT (project_id) DO UPDATE SET stamp = s.stamp + 1;
    END IF;
    RETURN NULL;
END;
$$
"""

GRANTS = f"""
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{ROLE}') THEN
        GRANT SELECT ON report_list_stamps TO {ROLE};
    END IF;
END
$$
"""


def upgrade() -> None:
    op.execute(
        "CREATE TABLE report_list_stamps ("
        " project_id uuid PRIMARY KEY REFERENCES projects (id) ON DELETE CASCADE,"
        " stamp bigint NOT NULL)"
    )
    op.execute(BUMP)
    op.execute("REVOKE ALL ON FUNCTION evalbook_bump_list_stamp() FROM PUBLIC")
    for table in ("report_envelopes", "incidents"):
        op.execute(
            f"CREATE CONSTRAINT TRIGGER {table}_list_stamp"
            f" AFTER INSERT OR UPDATE OR DELETE ON {table}"
            " DEFERRABLE INITIALLY DEFERRED FOR EACH ROW"
            " EXECUTE FUNCTION evalbook_bump_list_stamp()"
        )
    op.execute(GRANTS)


def downgrade() -> None:
    for table in ("report_envelopes", "incidents"):
        op.execute(f"DROP TRIGGER {table}_list_stamp ON {table}")
    op.execute("DROP FUNCTION evalbook_bump_list_stamp()")
    op.execute("DROP TABLE report_list_stamps")
