"""the service's own login cannot mint trust: signing keys and the log's key are the owner's,
log entries and checkpoints go through definer functions that compute them from stored rows,
incidents are resolved only through an audited function, verifications are append-only

Revision ID: 0021
Revises: 0020
Create Date: 2026-12-03
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0021"
down_revision: str | None = "0020"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

ROLE = "evalbook_service"
# pg_advisory_xact_lock keys, as app/repositories/transparency.py names them.
APPEND_LOCK = 30521787291824228
CUT_LOCK = 30521787325707380

SCHEMA = """
ALTER TABLE log_checkpoints ADD COLUMN compact bytea;
ALTER TABLE log_keys ALTER COLUMN source_keyid DROP NOT NULL;
CREATE TABLE incident_resolutions (
    incident_id bigint PRIMARY KEY REFERENCES incidents (id),
    actor text NOT NULL CHECK (length(actor) BETWEEN 1 AND 200),
    reason text NOT NULL CHECK (length(reason) BETWEEN 1 AND 2000),
    resolved_at timestamptz NOT NULL DEFAULT now()
);
ALTER TABLE report_verifications DROP CONSTRAINT pk_report_verifications;
ALTER TABLE report_verifications ADD COLUMN id bigserial PRIMARY KEY;
CREATE INDEX ix_report_verifications_report ON report_verifications (report_id, verified_at);
ALTER TABLE incidents ALTER COLUMN report_id DROP NOT NULL;
ALTER TABLE incidents ALTER COLUMN project_id DROP NOT NULL;
CREATE UNIQUE INDEX uq_incidents_open_log ON incidents (kind)
    WHERE report_id IS NULL AND resolved_at IS NULL;
"""

# How many set bits a non-negative bigint has (the compact range holds one hash per set bit
# of the tree's size, largest subtree first).
POPCOUNT = """
CREATE FUNCTION evalbook_popcount(x bigint) RETURNS int
LANGUAGE sql IMMUTABLE STRICT AS
$$ SELECT length(replace(x::bit(64)::text, '0', '')) $$
"""

# Entries are computed here, from the stored report, its attestation and (for a supersession)
# the signed statement: a caller names rows, never bytes, and only rows signed by a key the
# owner registered (the signature itself is checked by every verifier; SQL cannot). RFC 8785 by construction: keys in
# sorted order, no whitespace, strings escaped by to_json (as JCS escapes them).
APPEND = f"""
CREATE FUNCTION evalbook_log_append(p_kind text, p_ids uuid[]) RETURNS SETOF bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $fn$
DECLARE
    next_idx bigint;
    appended bigint;
BEGIN
    IF p_kind IS NULL OR p_kind NOT IN ('report', 'supersession') THEN
        RAISE EXCEPTION 'a log entry is of a report or of a supersession, not %', p_kind
            USING ERRCODE = '22023';
    END IF;
    IF p_ids IS NULL OR cardinality(p_ids) = 0 THEN
        RETURN;
    END IF;
    PERFORM pg_advisory_xact_lock({APPEND_LOCK});
    SELECT coalesce(max(idx) + 1, 0) INTO next_idx FROM log_entries;
    IF p_kind = 'report' THEN
        RETURN QUERY
        WITH wanted AS (
            SELECT u.id, u.ord FROM unnest(p_ids) WITH ORDINALITY AS u(id, ord)
        ), built AS (
            SELECT w.ord, r.id, convert_to(
                '{{"attestation_digest":' || to_json(a.digest)::text
                || ',"issued_at":' || to_json(to_char(r.issued_at AT TIME ZONE 'UTC',
                                             'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'))::text
                || ',"kind":"report","report_digest":' || to_json(r.digest)::text
                || ',"report_id":' || to_json(r.id::text)::text
                || ',"subject_digest":' || to_json(r.subject_digest)::text
                || ',"suite":{{"digest":' || to_json(s.ref ->> 'digest')::text
                || ',"id":' || to_json(s.ref ->> 'id')::text
                || ',"version":' || to_json(s.ref ->> 'version')::text || '}}}}',
                'UTF8') AS entry
            FROM wanted w
            JOIN reports r ON r.id = w.id
            JOIN report_attestations a ON a.report_id = r.id
            JOIN signing_keys k ON k.keyid = a.keyid
            CROSS JOIN LATERAL (
                SELECT convert_from(r.body, 'UTF8')::json -> 'suite_ref'
            ) AS s(ref)
        )
        INSERT INTO log_entries (idx, kind, report_id, entry, leaf)
        SELECT next_idx + b.ord - 1, 'report', b.id, b.entry,
               sha256('\\x00'::bytea || b.entry)
        FROM built b
        RETURNING idx;
    ELSE
        RETURN QUERY
        WITH wanted AS (
            SELECT u.id, u.ord FROM unnest(p_ids) WITH ORDINALITY AS u(id, ord)
        ), statements AS (
            SELECT w.ord, a.report_id AS id, a.digest,
                   convert_from(decode(convert_from(a.envelope, 'UTF8')::jsonb ->> 'payload',
                                       'base64'), 'UTF8')::jsonb -> 'predicate' AS p
            FROM wanted w
            JOIN supersession_attestations a ON a.report_id = w.id
            JOIN signing_keys k ON k.keyid = a.keyid
        ), built AS (
            SELECT t.ord, t.id, convert_to(
                '{{"at":' || to_json(t.p ->> 'at')::text
                || ',"kind":"supersession","statement_digest":' || to_json(t.digest)::text
                || ',"successor_report_id":' || coalesce(to_json(t.p ->> 'successor_report_id')::text, 'null')
                || ',"superseded_report_id":' || to_json(t.id::text)::text || '}}',
                'UTF8') AS entry
            FROM statements t
            WHERE t.p ->> 'superseded_report_id' = t.id::text AND t.p ->> 'at' IS NOT NULL
        )
        INSERT INTO log_entries (idx, kind, report_id, entry, leaf)
        SELECT next_idx + b.ord - 1, 'supersession', b.id, b.entry,
               sha256('\\x00'::bytea || b.entry)
        FROM built b
        RETURNING idx;
    END IF;
    GET DIAGNOSTICS appended = ROW_COUNT;
    IF appended <> cardinality(p_ids) THEN
        RAISE EXCEPTION 'only % of % named rows can be logged: a % is logged once, signed, '
            'and stored first', appended, cardinality(p_ids), p_kind USING ERRCODE = '22023';
    END IF;
END
$fn$
"""

# A checkpoint is stored only over the tree the stored entries make: the root is recomputed
# from the previous checkpoint's compact range and the new entries (leaf hashes recomputed
# from the entries too), and the note must state this log's origin, that size and that root.
CHECKPOINT = f"""
CREATE FUNCTION evalbook_log_checkpoint(p_size bigint, p_note bytea) RETURNS bytea
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $fn$
DECLARE
    prev record;
    m bigint := 0;
    prev_compact bytea := ''::bytea;
    hashes bytea;
    found_count bigint;
    a bigint;
    b bigint;
    k int := 0;
    new_compact bytea := ''::bytea;
    tree_root bytea;
    j int;
    log_origin text;
    expected text;
BEGIN
    PERFORM pg_advisory_xact_lock({CUT_LOCK});
    SELECT size, compact INTO prev FROM log_checkpoints ORDER BY size DESC LIMIT 1;
    IF FOUND THEN
        IF p_size IS NULL OR p_size <= prev.size THEN
            RAISE EXCEPTION 'a checkpoint of size % is not newer than the newest (%)',
                p_size, prev.size USING ERRCODE = '22023';
        END IF;
        -- A checkpoint from before compact ranges were kept: recompute from the first entry.
        IF prev.compact IS NOT NULL THEN
            m := prev.size;
            prev_compact := prev.compact;
        END IF;
    END IF;
    IF p_size IS NULL OR p_size < 0 THEN
        RAISE EXCEPTION 'a checkpoint size is a non-negative integer' USING ERRCODE = '22023';
    END IF;
    IF octet_length(prev_compact) <> 32 * evalbook_popcount(m) THEN
        RAISE EXCEPTION 'the stored compact range of checkpoint % is malformed', m
            USING ERRCODE = 'XX001';
    END IF;
    SELECT count(*), coalesce(string_agg(sha256('\\x00'::bytea || entry), ''::bytea
                                         ORDER BY idx), ''::bytea)
    INTO found_count, hashes
    FROM log_entries WHERE idx >= m AND idx < p_size;
    IF found_count <> p_size - m THEN
        RAISE EXCEPTION 'the log holds % entries in [%, %), not %', found_count, m, p_size,
            p_size - m USING ERRCODE = 'XX001';
    END IF;
    a := m;
    b := p_size;
    WHILE a < b LOOP
        IF a % 2 = 1 THEN
            hashes := substring(prev_compact FROM 32 * evalbook_popcount(m >> (k + 1)) + 1 FOR 32)
                     || hashes;
            a := a - 1;
        END IF;
        IF (b - a) % 2 = 1 THEN
            new_compact := substring(hashes FROM octet_length(hashes) - 31 FOR 32) || new_compact;
            hashes := substring(hashes FROM 1 FOR octet_length(hashes) - 32);
        END IF;
        SELECT coalesce(string_agg(sha256('\\x01'::bytea || substring(hashes FROM 64 * i + 1 FOR 64)),
                                   ''::bytea ORDER BY i), ''::bytea)
        INTO hashes
        FROM generate_series(0, ((b - a) / 2 - 1)::int) AS i;
        a := a / 2;
        b := b / 2;
        k := k + 1;
    END LOOP;
    new_compact := substring(prev_compact FROM 1 FOR 32 * evalbook_popcount(m >> k)) || new_compact;
    IF octet_length(new_compact) = 0 THEN
        tree_root := sha256(''::bytea);
    ELSE
        tree_root := substring(new_compact FROM octet_length(new_compact) - 31 FOR 32);
        FOR j IN REVERSE octet_length(new_compact) / 32 - 1 .. 1 LOOP
            tree_root := sha256('\\x01'::bytea
                                || substring(new_compact FROM 32 * (j - 1) + 1 FOR 32) || tree_root);
        END LOOP;
    END IF;
    SELECT name INTO log_origin FROM log_keys ORDER BY created_at DESC, name LIMIT 1;
    IF log_origin IS NULL THEN
        RAISE EXCEPTION 'the log has no key yet' USING ERRCODE = '55000';
    END IF;
    expected := log_origin || E'\\n' || p_size::text || E'\\n' || encode(tree_root, 'base64') || E'\\n\\n';
    IF p_note IS NULL OR position(convert_to(expected, 'UTF8') IN p_note) <> 1 THEN
        RAISE EXCEPTION 'the note does not state this log''s origin, size % and root %',
            p_size, encode(tree_root, 'base64') USING ERRCODE = '22023';
    END IF;
    INSERT INTO log_checkpoints (size, root, note, compact)
    VALUES (p_size, tree_root, p_note, new_compact);
    RETURN tree_root;
END
$fn$
"""

# The row lock a report's issue holds on the active key (a rotation waits for it): a locking
# read needs UPDATE on the table, which the service no longer has.
HOLD_ACTIVE_KEY = """
CREATE FUNCTION evalbook_hold_active_key() RETURNS text
LANGUAGE sql SECURITY DEFINER SET search_path = public, pg_temp AS
$$ SELECT keyid FROM signing_keys WHERE status = 'active' FOR SHARE $$
"""

RESOLVE = """
CREATE FUNCTION evalbook_resolve_incident(p_id bigint, p_actor text, p_reason text)
RETURNS timestamptz
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $fn$
DECLARE
    at timestamptz;
BEGIN
    UPDATE incidents SET resolved_at = now() WHERE id = p_id AND resolved_at IS NULL
    RETURNING resolved_at INTO at;
    IF at IS NULL THEN
        RAISE EXCEPTION 'no open incident %', p_id USING ERRCODE = 'P0002';
    END IF;
    INSERT INTO incident_resolutions (incident_id, actor, reason) VALUES (p_id, p_actor, p_reason);
    RETURN at;
END
$fn$
"""

# A verification row records when the check ran: now, never a time the writer chose (a row
# dated in the future would keep a report out of the sweep).
VERIFIED_NOW = """
CREATE FUNCTION evalbook_verified_now() RETURNS trigger
LANGUAGE plpgsql AS $fn$
BEGIN
    NEW.verified_at := now();
    RETURN NEW;
END
$fn$
"""

FUNCTIONS = (
    "evalbook_log_append(text, uuid[])",
    "evalbook_log_checkpoint(bigint, bytea)",
    "evalbook_hold_active_key()",
    "evalbook_resolve_incident(bigint, text, text)",
)


def _append_only(table: str) -> None:
    op.execute(
        f"CREATE TRIGGER {table}_append_only BEFORE UPDATE OR DELETE ON {table} "
        "FOR EACH ROW EXECUTE FUNCTION evalbook_issued_append_only()"
    )
    op.execute(
        f"CREATE TRIGGER {table}_no_truncate BEFORE TRUNCATE ON {table} "
        "FOR EACH STATEMENT EXECUTE FUNCTION evalbook_issued_append_only()"
    )


def upgrade() -> None:
    for statement in SCHEMA.split(";"):
        if statement.strip():
            op.execute(statement)
    for body in (POPCOUNT, APPEND, CHECKPOINT, HOLD_ACTIVE_KEY, RESOLVE, VERIFIED_NOW):
        op.execute(body)
    for signature in FUNCTIONS:
        op.execute(f"REVOKE ALL ON FUNCTION {signature} FROM PUBLIC")
    _append_only("report_verifications")
    _append_only("incident_resolutions")
    op.execute(
        "CREATE TRIGGER report_verifications_now BEFORE INSERT ON report_verifications "
        "FOR EACH ROW EXECUTE FUNCTION evalbook_verified_now()"
    )
    grants = [
        "REVOKE INSERT, UPDATE, DELETE ON signing_keys, log_entries, log_checkpoints, log_keys "
        f"FROM {ROLE}",
        f"REVOKE UPDATE, DELETE ON incidents, report_verifications FROM {ROLE}",
        f"GRANT SELECT ON incident_resolutions TO {ROLE}",
        f"GRANT INSERT ON report_verifications TO {ROLE}",
        f"GRANT USAGE ON SEQUENCE report_verifications_id_seq TO {ROLE}",
        *(f"GRANT EXECUTE ON FUNCTION {signature} TO {ROLE}" for signature in FUNCTIONS),
    ]
    op.execute(
        f"DO $$ BEGIN IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{ROLE}') THEN "
        + "; ".join(grants)
        + "; END IF; END $$"
    )


def downgrade() -> None:
    op.execute("DROP TRIGGER IF EXISTS report_verifications_now ON report_verifications")
    for table in ("report_verifications", "incident_resolutions"):
        op.execute(f"DROP TRIGGER IF EXISTS {table}_append_only ON {table}")
        op.execute(f"DROP TRIGGER IF EXISTS {table}_no_truncate ON {table}")
    for signature in FUNCTIONS:
        op.execute(f"DROP FUNCTION IF EXISTS {signature}")
    op.execute("DROP FUNCTION IF EXISTS evalbook_verified_now()")
    op.execute("DROP FUNCTION IF EXISTS evalbook_popcount(bigint)")
    op.execute("DROP TABLE IF EXISTS incident_resolutions")
    op.execute("ALTER TABLE log_checkpoints DROP COLUMN IF EXISTS compact")
    # Back to one row per report (the newest); the log's own incidents have no report.
    op.execute(
        "DELETE FROM report_verifications v USING report_verifications w"
        " WHERE v.report_id = w.report_id AND v.id < w.id"
    )
    op.execute("DROP INDEX IF EXISTS ix_report_verifications_report")
    op.execute("ALTER TABLE report_verifications DROP COLUMN id")
    op.execute(
        "ALTER TABLE report_verifications ADD CONSTRAINT pk_report_verifications"
        " PRIMARY KEY (report_id)"
    )
    op.execute("DROP INDEX IF EXISTS uq_incidents_open_log")
    op.execute("DELETE FROM incidents WHERE report_id IS NULL")
    op.execute("ALTER TABLE incidents ALTER COLUMN report_id SET NOT NULL")
    op.execute("ALTER TABLE incidents ALTER COLUMN project_id SET NOT NULL")
    # log_keys.source_keyid stays nullable: a log key of the log's own has no source.
    op.execute(
        f"DO $$ BEGIN IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{ROLE}') THEN "
        f"GRANT INSERT ON signing_keys, log_entries, log_checkpoints, log_keys TO {ROLE}; "
        f"GRANT UPDATE ON signing_keys, incidents, report_verifications TO {ROLE}; "
        "END IF; END $$"
    )
