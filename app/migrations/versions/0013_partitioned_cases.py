"""cases partitioned by evaluation, each case's example position stored, outputs past 128
bytes in a table of their own

`cases` becomes a table partitioned by hash of `evaluation_id`, so one evaluation's rows sit in
one partition: its scan, its index and its vacuum touch a sixteenth of the table, and autovacuum
runs per partition. Each case gains `example_position` (the example's position in its dataset
version, in example id byte order), so finishing reads integers rather than ids. Inline outputs
longer than 128 bytes move to `case_outputs` (partitioned the same way), so the scan that
finishes an evaluation reads narrow rows whatever the outputs weigh (TOAST would not help:
PostgreSQL only moves values out of line once a row passes ~2 kB, whatever
`toast_tuple_target` says); shorter ones stay in the row, where they cost less than a second
table's row and index entry. The other columns are bounded
by validation and stay in the row uncompressed. Existing rows are moved.

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-30
"""

import json
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

ROLE = "evalbook_service"
PARTITIONS = 16
# Outputs up to this many bytes stay in `cases` (app.ingestion.rows.INLINE_OUTPUT_BYTES).
INLINE_OUTPUT_BYTES = 128
MOVED_COLUMNS = (
    "evaluation_id, check_id, example_id, repeat, status, score, output_digest,"
    " output_key, evidence_refs, trace_id, trace_digest, scorer_version, assurance, leaf,"
    " created_at, output_removed_at"
)
# Columns whose size validation bounds (identifiers, digests, codes) stay in the row and are
# never compressed; evidence lists (up to 1,000 digests) stay in line when they fit.
STORAGE = {
    "check_id": "PLAIN",
    "example_id": "PLAIN",
    "status": "PLAIN",
    "output": "PLAIN",
    "output_digest": "PLAIN",
    "output_key": "PLAIN",
    "evidence_refs": "MAIN",
    "trace_id": "PLAIN",
    "trace_digest": "PLAIN",
    "scorer_version": "PLAIN",
    "assurance": "PLAIN",
    "leaf": "PLAIN",
}

CREATE = f"""
CREATE TABLE cases (
    evaluation_id uuid NOT NULL,
    check_id text COLLATE "C" NOT NULL,
    example_id text COLLATE "C" NOT NULL,
    example_position integer NOT NULL,
    repeat integer NOT NULL,
    status text NOT NULL,
    score double precision,
    output text CONSTRAINT ck_cases_output_inline
        CHECK (octet_length(output) <= {INLINE_OUTPUT_BYTES}),
    output_digest text,
    output_key text,
    evidence_refs text[],
    trace_id text,
    trace_digest text,
    scorer_version text COLLATE "C" NOT NULL,
    assurance text NOT NULL,
    leaf bytea NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    output_removed_at timestamp with time zone,
    CONSTRAINT pk_cases PRIMARY KEY (evaluation_id, check_id, example_id, repeat),
    CONSTRAINT ck_cases_assurance CHECK (assurance IN ('development_unisolated', 'reported',
        'independently_observed', 'human_attested', 'platform_verified')),
    CONSTRAINT ck_cases_status CHECK (status IN ('pass', 'fail', 'error', 'timeout',
        'cancelled', 'skipped', 'unsupported', 'abstained')),
    CONSTRAINT ck_cases_repeat CHECK (repeat >= 0),
    CONSTRAINT ck_cases_example_position CHECK (example_position >= 0),
    CONSTRAINT ck_cases_leaf CHECK (octet_length(leaf) = 32)
) PARTITION BY HASH (evaluation_id)
"""
CREATE_OUTPUTS = """
CREATE TABLE case_outputs (
    evaluation_id uuid NOT NULL,
    check_id text COLLATE "C" NOT NULL,
    example_id text COLLATE "C" NOT NULL,
    repeat integer NOT NULL,
    output text NOT NULL,
    CONSTRAINT pk_case_outputs PRIMARY KEY (evaluation_id, check_id, example_id, repeat)
) PARTITION BY HASH (evaluation_id)
"""

GRANTS = f"""
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{ROLE}') THEN
        GRANT SELECT, INSERT ON cases TO {ROLE};
        GRANT UPDATE (output, output_key, output_removed_at) ON cases TO {ROLE};
        GRANT SELECT, INSERT, DELETE ON case_outputs TO {ROLE};
    END IF;
END
$$
"""


def _positions(connection: sa.Connection) -> None:
    """A temporary (evaluation, check) -> dataset version map for the stored cases."""
    connection.execute(
        sa.text(
            'CREATE TEMP TABLE check_datasets (evaluation_id uuid, check_id text COLLATE "C",'
            " dataset_version_id uuid) ON COMMIT DROP"
        )
    )
    evaluations = connection.execute(
        sa.text(
            "SELECT e.id, sv.project_id, sv.content FROM evaluations e"
            " JOIN suite_versions sv ON sv.id = e.suite_version_id"
            " WHERE EXISTS (SELECT 1 FROM cases_unpartitioned c WHERE c.evaluation_id = e.id)"
        )
    ).all()
    for evaluation_id, project_id, content in evaluations:
        for check in json.loads(content)["checks"]:
            connection.execute(
                sa.text(
                    "INSERT INTO check_datasets SELECT :e, :c, id FROM dataset_versions"
                    " WHERE project_id = :p AND name = :n AND version = :v"
                ),
                {
                    "e": evaluation_id,
                    "c": check["check_id"],
                    "p": project_id,
                    "n": check["dataset"]["name"],
                    "v": check["dataset"]["version"],
                },
            )


def upgrade() -> None:
    connection = op.get_bind()
    op.execute("ALTER TABLE cases RENAME TO cases_unpartitioned")
    op.execute("ALTER TABLE cases_unpartitioned RENAME CONSTRAINT pk_cases TO pk_cases_old")
    op.execute(CREATE)
    op.execute(CREATE_OUTPUTS)
    for table in ("cases", "case_outputs"):
        for remainder in range(PARTITIONS):
            op.execute(
                f"CREATE TABLE {table}_p{remainder:02d} PARTITION OF {table}"
                f" FOR VALUES WITH (MODULUS {PARTITIONS}, REMAINDER {remainder})"
            )
    for column, storage in STORAGE.items():
        op.execute(f"ALTER TABLE cases ALTER COLUMN {column} SET STORAGE {storage}")
    _positions(connection)
    op.execute(
        f"INSERT INTO cases ({MOVED_COLUMNS}, example_position, output)"
        f" SELECT {', '.join('c.' + c.strip() for c in MOVED_COLUMNS.split(','))},"
        f" p.position, CASE WHEN octet_length(c.output) <= {INLINE_OUTPUT_BYTES}"
        " THEN c.output END FROM cases_unpartitioned c"
        " JOIN check_datasets d ON d.evaluation_id = c.evaluation_id AND d.check_id = c.check_id"
        " JOIN (SELECT dataset_version_id, example_id, (row_number() OVER"
        " (PARTITION BY dataset_version_id ORDER BY example_id) - 1)::integer AS position"
        " FROM examples WHERE dataset_version_id IN (SELECT dataset_version_id FROM"
        " check_datasets)) p"
        " ON p.dataset_version_id = d.dataset_version_id AND p.example_id = c.example_id"
    )
    op.execute(
        "INSERT INTO case_outputs (evaluation_id, check_id, example_id, repeat, output)"
        " SELECT evaluation_id, check_id, example_id, repeat, output FROM cases_unpartitioned"
        f" WHERE octet_length(output) > {INLINE_OUTPUT_BYTES}"
    )
    moved = connection.execute(sa.text("SELECT count(*) FROM cases")).scalar_one()
    stored = connection.execute(sa.text("SELECT count(*) FROM cases_unpartitioned")).scalar_one()
    if moved != stored:
        raise RuntimeError(f"moved {moved} of {stored} cases: some case names no known example")
    op.execute("DROP TABLE cases_unpartitioned")
    op.execute(GRANTS)


def downgrade() -> None:
    op.execute("ALTER TABLE cases RENAME TO cases_partitioned")
    op.execute("ALTER TABLE cases_partitioned RENAME CONSTRAINT pk_cases TO pk_cases_partitioned")
    op.execute(
        "CREATE TABLE cases (LIKE cases_partitioned INCLUDING DEFAULTS INCLUDING CONSTRAINTS)"
    )
    op.execute("ALTER TABLE cases DROP CONSTRAINT ck_cases_example_position")
    op.execute("ALTER TABLE cases DROP COLUMN example_position")
    op.execute("ALTER TABLE cases DROP CONSTRAINT ck_cases_output_inline")
    op.execute(
        "ALTER TABLE cases ADD CONSTRAINT pk_cases"
        " PRIMARY KEY (evaluation_id, check_id, example_id, repeat)"
    )
    op.execute(
        f"INSERT INTO cases ({MOVED_COLUMNS}, output)"
        f" SELECT {', '.join('c.' + c.strip() for c in MOVED_COLUMNS.split(','))},"
        " coalesce(c.output, o.output)"
        " FROM cases_partitioned c LEFT JOIN case_outputs o USING"
        " (evaluation_id, check_id, example_id, repeat)"
    )
    op.execute("DROP TABLE case_outputs")
    op.execute("DROP TABLE cases_partitioned")
    op.execute(
        f"DO $$ BEGIN IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{ROLE}') THEN"
        f" GRANT SELECT, INSERT ON cases TO {ROLE};"
        f" GRANT UPDATE (output, output_key, output_removed_at) ON cases TO {ROLE};"
        " END IF; END $$"
    )
