"""boards: rankings of the current gate reports of a suite version, stored immutably with their
signed envelope, and logged as entries of kind `board` by an owner's function

Revision ID: 0022
Revises: 0021
Create Date: 2026-12-05
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0022"
down_revision: str | None = "0021"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

ROLE = "evalbook_service"
# The append lock of 0021 (app/repositories/transparency.py names it): boards, reports and
# supersessions take contiguous indexes from one sequence of appends.
APPEND_LOCK = 30521787291824228

SCHEMA = """
CREATE TABLE boards (
    id uuid PRIMARY KEY,
    project_id uuid NOT NULL REFERENCES projects (id),
    suite_id uuid NOT NULL REFERENCES suites (id),
    suite_version_id uuid NOT NULL REFERENCES suite_versions (id),
    check_id text NOT NULL CHECK (length(check_id) BETWEEN 1 AND 200),
    subjects integer NOT NULL CHECK (subjects BETWEEN 2 AND 200),
    body bytea NOT NULL,
    digest text NOT NULL CHECK (digest ~ '^sha256:[0-9a-f]{64}$'),
    keyid text NOT NULL REFERENCES signing_keys (keyid),
    envelope bytea NOT NULL,
    attestation_digest text NOT NULL CHECK (attestation_digest ~ '^sha256:[0-9a-f]{64}$'),
    created_at timestamptz NOT NULL
);
CREATE INDEX ix_boards_project_created ON boards (project_id, created_at, id);
CREATE INDEX ix_boards_project_suite_created ON boards (project_id, suite_id, created_at, id);
ALTER TABLE log_entries DROP CONSTRAINT log_entries_kind_check;
ALTER TABLE log_entries ADD CONSTRAINT log_entries_kind_check
    CHECK (kind IN ('report', 'supersession', 'board'));
COMMENT ON COLUMN log_entries.report_id IS
    'the report (kind report), the superseded report (supersession) or the board (board)'
"""

# As evalbook_log_append: the entry is computed from the stored board (its body names the suite
# version, the check and when it was made), only for a board signed by a key the owner
# registered, RFC 8785 by construction (keys sorted, no whitespace, to_json escapes).
APPEND_BOARDS = f"""
CREATE FUNCTION evalbook_log_append_boards(p_ids uuid[]) RETURNS SETOF bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $fn$
DECLARE
    next_idx bigint;
    appended bigint;
BEGIN
    IF p_ids IS NULL OR cardinality(p_ids) = 0 THEN
        RETURN;
    END IF;
    PERFORM pg_advisory_xact_lock({APPEND_LOCK});
    SELECT coalesce(max(idx) + 1, 0) INTO next_idx FROM log_entries;
    RETURN QUERY
    WITH wanted AS (
        SELECT u.id, u.ord FROM unnest(p_ids) WITH ORDINALITY AS u(id, ord)
    ), built AS (
        SELECT w.ord, b.id, convert_to(
            '{{"attestation_digest":' || to_json(b.attestation_digest)::text
            || ',"board_digest":' || to_json(b.digest)::text
            || ',"board_id":' || to_json(b.id::text)::text
            || ',"check_id":' || to_json(d.j ->> 'check_id')::text
            || ',"created_at":' || to_json(d.j ->> 'created_at')::text
            || ',"kind":"board","suite":{{"digest":' || to_json(d.j -> 'suite_ref' ->> 'digest')::text
            || ',"id":' || to_json(d.j -> 'suite_ref' ->> 'id')::text
            || ',"version":' || to_json(d.j -> 'suite_ref' ->> 'version')::text || '}}}}',
            'UTF8') AS entry
        FROM wanted w
        JOIN boards b ON b.id = w.id
        JOIN signing_keys k ON k.keyid = b.keyid
        CROSS JOIN LATERAL (SELECT convert_from(b.body, 'UTF8')::json) AS d(j)
        WHERE d.j ->> 'board_id' = b.id::text
    )
    INSERT INTO log_entries (idx, kind, report_id, entry, leaf)
    SELECT next_idx + b.ord - 1, 'board', b.id, b.entry, sha256('\\x00'::bytea || b.entry)
    FROM built b
    RETURNING idx;
    GET DIAGNOSTICS appended = ROW_COUNT;
    IF appended <> cardinality(p_ids) THEN
        RAISE EXCEPTION 'only % of % named boards can be logged: a board is logged once, '
            'signed, and stored first', appended, cardinality(p_ids) USING ERRCODE = '22023';
    END IF;
END
$fn$
"""

FUNCTION = "evalbook_log_append_boards(uuid[])"


def upgrade() -> None:
    for statement in SCHEMA.split(";"):
        if statement.strip():
            op.execute(statement)
    op.execute(APPEND_BOARDS)
    op.execute(f"REVOKE ALL ON FUNCTION {FUNCTION} FROM PUBLIC")
    op.execute(
        "CREATE TRIGGER boards_append_only BEFORE UPDATE OR DELETE ON boards "
        "FOR EACH ROW EXECUTE FUNCTION evalbook_issued_append_only()"
    )
    op.execute(
        "CREATE TRIGGER boards_no_truncate BEFORE TRUNCATE ON boards "
        "FOR EACH STATEMENT EXECUTE FUNCTION evalbook_issued_append_only()"
    )
    op.execute(
        f"DO $$ BEGIN IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{ROLE}') THEN "
        f"GRANT SELECT, INSERT ON boards TO {ROLE}; "
        f"GRANT EXECUTE ON FUNCTION {FUNCTION} TO {ROLE}; END IF; END $$"
    )


def downgrade() -> None:
    op.execute(f"DROP FUNCTION IF EXISTS {FUNCTION}")
    op.execute("DROP TABLE IF EXISTS boards")
    # Board entries stay in the append-only log; the kinds they need stay allowed.
