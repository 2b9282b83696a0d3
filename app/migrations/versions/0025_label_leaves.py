"""labels: each label's leaf hash and its example's position, written when the label is taken
so that a judged finish reads them rather than re-encoding a hundred thousand labels; the
"while running" rule checked once a statement rather than once a row

Revision ID: 0025
Revises: 0024
Create Date: 2026-12-06
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0025"
down_revision: str | None = "0024"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Null for a label taken before this revision: the finish then hashes its leaf from the label.
UPGRADE = """
ALTER TABLE labels
    ADD COLUMN leaf bytea CHECK (octet_length(leaf) = 32),
    ADD COLUMN example_position integer CHECK (example_position >= 0)
"""
DOWNGRADE = "ALTER TABLE labels DROP COLUMN leaf, DROP COLUMN example_position"

# The rule of 0024 (a label is taken only while its evaluation runs) and the two foreign keys
# (its evaluation, the token that posted it), checked over the statement's new rows at once:
# three lookups a label were half of a 20,000-label insert (the benchmark's EXPLAIN: 148 of
# 297 ms in the key checks). Raising after the statement rolls every row of it back, as before;
# neither an evaluation nor a token is ever deleted.
STATEMENT_RULE = """
CREATE FUNCTION evalbook_labels_while_running_all() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (
        SELECT 1 FROM (SELECT DISTINCT evaluation_id FROM new_labels) n
        WHERE NOT EXISTS (
            SELECT 1 FROM evaluations e WHERE e.id = n.evaluation_id AND e.status = 'running'
        )
    ) THEN
        RAISE EXCEPTION 'labels are taken while the evaluation runs; it is finished'
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF EXISTS (
        SELECT 1 FROM (SELECT DISTINCT token_id FROM new_labels) n
        WHERE NOT EXISTS (SELECT 1 FROM api_tokens t WHERE t.id = n.token_id)
    ) THEN
        RAISE EXCEPTION 'a label names a token that does not exist'
            USING ERRCODE = 'foreign_key_violation';
    END IF;
    RETURN NULL;
END
$$
"""


def upgrade() -> None:
    """The two columns, and the running rule and the keys as one statement trigger."""
    op.execute(UPGRADE)
    op.execute(STATEMENT_RULE)
    op.execute("ALTER TABLE labels DROP CONSTRAINT labels_evaluation_id_fkey")
    op.execute("ALTER TABLE labels DROP CONSTRAINT labels_token_id_fkey")
    op.execute("DROP TRIGGER labels_while_running ON labels")
    op.execute(
        "CREATE TRIGGER labels_while_running AFTER INSERT ON labels "
        "REFERENCING NEW TABLE AS new_labels "
        "FOR EACH STATEMENT EXECUTE FUNCTION evalbook_labels_while_running_all()"
    )


def downgrade() -> None:
    """The row trigger of 0024 back; the columns dropped."""
    op.execute("DROP TRIGGER labels_while_running ON labels")
    op.execute("DROP FUNCTION evalbook_labels_while_running_all()")
    op.execute(
        "CREATE TRIGGER labels_while_running BEFORE INSERT ON labels "
        "FOR EACH ROW EXECUTE FUNCTION evalbook_labels_while_running()"
    )
    op.execute(
        "ALTER TABLE labels ADD CONSTRAINT labels_evaluation_id_fkey FOREIGN KEY (evaluation_id) "
        "REFERENCES evaluations (id)"
    )
    op.execute(
        "ALTER TABLE labels ADD CONSTRAINT labels_token_id_fkey FOREIGN KEY (token_id) "
        "REFERENCES api_tokens (id)"
    )
    op.execute(DOWNGRADE)
