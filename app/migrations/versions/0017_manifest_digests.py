"""evidence manifests stored as their digests' bytes (32 an entry) instead of JSON text (74)

A 10-million-case report's manifests were 740 MB of hex digests; written at finish, they were a
quarter of its time. The column `digests` holds each entry's 32 bytes, in order, and is stored
uncompressed (digests do not compress); the service writes the JSON document's digests and
rebuilds the document exactly when a bundle needs it (app/digest/manifest_digests.py). Existing
manifests are converted here, the append-only trigger held off for that one update.

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-01
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0017"
down_revision: str | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TRIGGER = "evidence_manifests_append_only"

TO_DIGESTS = """
UPDATE evidence_manifests SET digests = (
    SELECT string_agg(decode(substr(entry, 8), 'hex'), ''::bytea ORDER BY n)
    FROM jsonb_array_elements_text(convert_from(manifest, 'UTF8')::jsonb)
        WITH ORDINALITY AS t(entry, n)
)
"""

TO_DOCUMENT = """
UPDATE evidence_manifests SET manifest = convert_to(
    '[' || (
        SELECT string_agg('"sha256:' || encode(substring(digests FROM i * 32 + 1 FOR 32), 'hex')
                          || '"', ',' ORDER BY i)
        FROM generate_series(0, length(digests) / 32 - 1) AS i
    ) || ']', 'UTF8')
"""

# As migration 0014 left the JSON column: lz4 where the server has it.
DOCUMENT_COMPRESSION = """
DO $$
BEGIN
    ALTER TABLE evidence_manifests ALTER COLUMN manifest SET COMPRESSION lz4;
EXCEPTION WHEN feature_not_supported THEN
    ALTER TABLE evidence_manifests ALTER COLUMN manifest SET STORAGE EXTERNAL;
END
$$
"""


def upgrade() -> None:
    op.execute("ALTER TABLE evidence_manifests ADD COLUMN digests bytea")
    op.execute("ALTER TABLE evidence_manifests ALTER COLUMN digests SET STORAGE EXTERNAL")
    op.execute(f"ALTER TABLE evidence_manifests DISABLE TRIGGER {TRIGGER}")
    op.execute(TO_DIGESTS)
    op.execute(f"ALTER TABLE evidence_manifests ENABLE TRIGGER {TRIGGER}")
    op.execute("ALTER TABLE evidence_manifests ALTER COLUMN digests SET NOT NULL")
    op.execute(
        "ALTER TABLE evidence_manifests ADD CONSTRAINT ck_evidence_manifests_digests"
        " CHECK (length(digests) > 0 AND length(digests) % 32 = 0)"
    )
    op.execute("ALTER TABLE evidence_manifests DROP COLUMN manifest")


def downgrade() -> None:
    op.execute("ALTER TABLE evidence_manifests ADD COLUMN manifest bytea")
    op.execute(DOCUMENT_COMPRESSION)
    op.execute(f"ALTER TABLE evidence_manifests DISABLE TRIGGER {TRIGGER}")
    op.execute(TO_DOCUMENT)
    op.execute(f"ALTER TABLE evidence_manifests ENABLE TRIGGER {TRIGGER}")
    op.execute("ALTER TABLE evidence_manifests ALTER COLUMN manifest SET NOT NULL")
    op.execute("ALTER TABLE evidence_manifests DROP COLUMN digests")
