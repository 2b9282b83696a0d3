"""Service settings: one object, read from EVALBOOK_* environment variables."""

from __future__ import annotations

import math
from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    """Everything the service and its command line read from the environment."""

    model_config = SettingsConfigDict(env_prefix="EVALBOOK_", extra="ignore")

    database_url: str | None = Field(
        default=None, description="PostgreSQL URL; without it the embedded server is started."
    )
    migration_database_url: str | None = Field(
        default=None,
        description="The database as the role that owns the tables (migrations); without it, "
        "EVALBOOK_DATABASE_URL, which is then that role too.",
    )
    read_database_url: str | None = Field(
        default=None,
        description="A streaming replica (hot standby) of the database for report reads (GET "
        "report, forSubject, lists, pages); without it they read the primary.",
    )
    read_replica_poll_seconds: float = Field(default=0.05, gt=0)
    data_dir: Path = Field(default=Path(".evalbook"), description="Embedded database and objects.")
    signing_key_file: Path | None = Field(
        default=None,
        description="An Ed25519 private key (PKCS#8 PEM) to sign reports with; without it a key "
        "is generated on first start into the data directory's keys/ (mode 0600).",
    )
    log_key_file: Path | None = Field(
        default=None,
        description="The transparency log's own Ed25519 note key (PKCS#8 PEM), apart from the "
        "report signing key; without it `evalbook keys init` (the owner) generates one into the "
        "data directory's log-keys/ (mode 0600).",
    )
    embedded_database: bool = Field(
        default=True,
        description="Without EVALBOOK_DATABASE_URL, start an embedded PostgreSQL in the data "
        "directory; false (as in the container) makes the URL required.",
    )
    migrate_on_start: bool = Field(
        default=True,
        description="`evalbook serve` applies pending migrations first; false where migrations "
        "run as their own step (`evalbook migrate`, as the container is meant to be used).",
    )
    s3_endpoint_url: str | None = None
    s3_bucket: str | None = None
    s3_region: str = "us-east-1"
    s3_access_key_id: str | None = None
    s3_secret_access_key: str | None = None
    public_base_url: str | None = Field(
        default=None,
        description="Where clients reach the service (envelope URLs, page links); without it, "
        "the address `evalbook serve` listens on, else the address each request reached.",
    )
    # The edge's limits and timeouts (docs/decisions/history.md, "Hardening, second round").
    # A request body from which nothing arrived for this long is answered 408.
    body_idle_seconds: float = Field(default=30.0, gt=0)
    # Request heads: at most this many bytes (request line and fields) and fields (431 past
    # either), complete within `header_timeout_seconds` of the connection or the last answer.
    max_header_bytes: int = Field(default=32 * 1024, ge=1024)
    max_header_fields: int = Field(default=100, ge=8)
    header_timeout_seconds: float = Field(default=10.0, gt=0)
    # NDJSON case uploads a process streams into the database at once (each holds a pooled
    # connection while its body arrives); more wait for a turn, up to the wait below, then 503.
    ingest_streams: int = Field(default=8, ge=1)
    ingest_stream_wait_seconds: float = Field(default=10.0, ge=0)
    # The pace an NDJSON case stream must keep (docs/api.md, "Streaming cases"): a complete
    # line at least every `ingest_line_seconds` (a byte now and then is no progress, and would
    # hold a turn for ever), the whole stream within `ingest_stream_seconds`. Lines held for
    # `ingest_flush_seconds` are written, so the stream's transaction is never idle for long
    # enough that PostgreSQL ends it (`db_idle_in_transaction_timeout_ms`).
    ingest_line_seconds: float = Field(default=30.0, gt=0)
    ingest_stream_seconds: float = Field(default=3600.0, gt=0)
    ingest_flush_seconds: float = Field(default=5.0, gt=0)
    # A service session idle inside a transaction this long is ended by PostgreSQL.
    db_idle_in_transaction_timeout_ms: int = Field(default=60_000, ge=1_000)
    # Object-store calls: each attempt connects within and reads every part within these; an
    # outage is a 503 within (connect + read) x attempts, which its Retry-After says.
    s3_connect_timeout_seconds: float = Field(default=1.0, gt=0)
    s3_read_timeout_seconds: float = Field(default=4.0, gt=0)
    s3_max_attempts: int = Field(default=2, ge=1, le=10)
    # The slowest the store may take what it is sent: a call that sends N bytes is given up
    # after the outage time plus N / this (a store that stopped reading holds nothing for ever).
    s3_min_bytes_per_second: float = Field(default=1024 * 1024, gt=0)
    # /readyz answers within this, whatever a dependency does.
    readiness_timeout_seconds: float = Field(default=1.5, gt=0)
    # Peer callbacks: https to public addresses only. `callback_allow_http` admits http
    # (development); `callback_private_hosts` names hosts (names or addresses, as written in
    # the URL) that may be private or loopback (tests, development).
    callback_allow_http: bool = False
    callback_private_hosts: list[str] = Field(default_factory=list)
    # When set, callback host names resolve through this table alone, never by DNS (offline
    # development, tests): {"name": ["address", ...]}.
    callback_static_hosts: dict[str, list[str]] | None = None
    max_json_body_bytes: int = 32 * 1024 * 1024
    max_ndjson_line_bytes: int = 8 * 1024 * 1024
    inline_output_limit_bytes: int = 262_144
    ingest_chunk_rows: int = 10_000
    gc_gen0_threshold: int = 50_000
    db_pool_size: int = 10
    db_max_overflow: int = 10
    # The background workers' own pool (checkpoint cutting, notifications, the sweep): a
    # process whose request pool is saturated still cuts, delivers and verifies.
    background_pool_size: int = Field(default=2, ge=1, le=10)
    db_statement_timeout_ms: int = 60_000
    # Hot reads hold a connection ~1 ms; 32 concurrent pollers queue behind 10 (p99 ~40 ms),
    # not behind 20 (p99 ~7 ms) on the project's 2-core machine.
    reader_pool_size: int = 20
    # The longest a request waits for a connection of either pool before its 503 (decision
    # 0019): far above a healthy wait (milliseconds), far below a client's patience.
    db_acquire_timeout_seconds: float = Field(default=5.0, gt=0)
    # work_mem of the query that reads a check's cases for finish (set for that query alone):
    # large enough that ordering a big check's cases never spills to disk.
    finish_work_mem: str = Field(default="256MB", pattern=r"^[0-9]{1,7}(kB|MB|GB)$")
    # A finish reads a suite of this many expected cases or more on the read pool, several
    # checks at once; a smaller one on its own transaction's connection (fewer round trips).
    finish_pooled_reads_from: int = Field(default=10_000, ge=0)
    # Worker processes hashing the cases trees of checks with at least `finish_hash_min_cases`
    # cases during a finish (0: every tree is hashed in a thread of the service).
    finish_hash_workers: int = Field(default=1, ge=0, le=16)
    finish_hash_min_cases: int = Field(default=65_536, ge=1)
    auth_cache_seconds: float = 2.0
    # Leaves of built cases trees kept for case proofs (about 100 bytes each).
    case_tree_cache_leaves: int = Field(default=4_000_000, ge=0)
    # Rendered report list pages kept while nothing on them changes (0: none kept).
    list_cache_bytes: int = Field(default=32 * 1024 * 1024, ge=0)
    # Listed reports kept by version, so that a page read anew renders them again (0: none).
    report_item_cache_bytes: int = Field(default=64 * 1024 * 1024, ge=0)
    # Answer the happy path of GET report / forSubject below FastAPI (app/api/fastlane.py).
    read_fast_lane: bool = True
    log_level: str = "info"
    # The background verification sweep: every report re-verified at least every
    # `verify_sweep_every_hours`, at most `verify_sweep_batch` reports a round, a round every
    # `verify_sweep_interval_seconds` (defaults: an hour; 1,000 every 30 s, 120,000 reports an
    # hour).
    verify_sweep_enabled: bool = True
    verify_sweep_every_hours: float = Field(default=1.0, gt=0)
    log_origin: str | None = Field(
        default=None,
        description="The transparency log's origin line (and its note key's name); default: "
        "the public base URL's host and path, then /log.",
        max_length=200,
    )
    log_checkpoint_seconds: float = Field(
        default=1.0, gt=0, description="How often a new checkpoint may be cut (at most)."
    )
    log_tile_cache_bytes: int = Field(
        default=512 * 1024 * 1024,
        ge=0,
        description="Full tiles and entry bundles of the transparency log kept per process "
        "(they never change); beyond it they are read from the database again.",
    )
    log_export_witnesses: int = Field(
        default=1,
        ge=0,
        description="A bundle carries the newest checkpoint covering its report that holds at "
        "least this many witness cosignatures (and a consistency proof from it to the newest); "
        "0, or none such: the newest.",
    )
    log_witness_keys: list[str] = Field(
        default_factory=list,
        description="Witness verifier keys (C2SP vkeys, cosignature/v1) whose cosignatures the "
        "log accepts and serves with its checkpoints.",
    )
    log_witness_urls: dict[str, str] = Field(
        default_factory=dict,
        description="Witnesses the log asks to cosign each new checkpoint (C2SP tlog-witness "
        "add-checkpoint): witness name (one of log_witness_keys) -> submission prefix URL.",
    )
    verify_sweep_batch: int = Field(default=1000, ge=1)
    verify_sweep_interval_seconds: float = Field(default=30.0, gt=0)
    notifications_enabled: bool = True
    notify_poll_seconds: float = 1.0
    notify_batch: int = 50
    # The whole exchange with a peer (connect, send, the whole answer), not one read.
    notify_timeout_seconds: float = 10.0
    # Deliveries in flight to one peer at once (the others' go on beside them).
    notify_per_peer: int = Field(default=4, ge=1)
    notify_backoff_base_seconds: float = 2.0
    notify_backoff_cap_seconds: float = 3600.0
    notify_horizon_seconds: float = 3 * 24 * 3600.0
    notify_lease_seconds: float = 60.0
    # S3 refuses parts under 5 MiB (all but the last); a build holds about three parts.
    bundle_part_bytes: int = Field(default=8 * 1024 * 1024, ge=5 * 1024 * 1024)
    # The documented 20,000 cases per kind (docs/bundles.md); lower only to exercise
    # `case_limit` in tests.
    bundle_case_limit: int = Field(default=20_000, ge=1)
    # ISA-L's levels (0-3): level 1 compresses as tightly as zlib's 6 at seven times its speed.
    bundle_gzip_level: int = Field(default=1, ge=0, le=3)
    # The longest a bundle's bytes may take to reach the store, all parts together.
    bundle_upload_seconds: float = Field(default=900.0, gt=0)
    bundle_abort_horizon_seconds: float = 3600.0
    bundle_abort_backoff_cap_seconds: float = 60.0
    # Uploads older than this are taken for a crash's leftovers by the start-up sweep.
    bundle_sweep_after_seconds: float = 3600.0

    @property
    def store_outage_seconds(self) -> int:
        """The longest an object-store call takes to fail: every attempt's timeouts, and up
        to a second of backoff before each retry (the Retry-After of a store outage)."""
        attempt = self.s3_connect_timeout_seconds + self.s3_read_timeout_seconds
        return math.ceil(attempt * self.s3_max_attempts + (self.s3_max_attempts - 1))

    @property
    def signing_keys_dir(self) -> Path:
        """Where generated signing keys are kept."""
        return self.data_dir / "keys"

    @property
    def log_keys_dir(self) -> Path:
        """Where a generated note key of the transparency log is kept."""
        return self.data_dir / "log-keys"

    def log_name(self) -> str:
        """The log's origin: configured, else the public base URL's host and path + /log."""
        if self.log_origin:
            return self.log_origin
        if self.public_base_url:
            from urllib.parse import urlsplit

            parts = urlsplit(self.public_base_url)
            return f"{parts.netloc}{parts.path.rstrip('/')}/log"
        return "evalbook.localhost/log"

    @property
    def local_object_dir(self) -> Path:
        """Directory of the local object store (used when no S3 endpoint is set)."""
        return self.data_dir / "objects"


def to_asyncpg_url(url: str) -> str:
    """Rewrite postgresql:// (or postgres://) into SQLAlchemy's postgresql+asyncpg:// form."""
    for prefix in ("postgresql+asyncpg://", "postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+asyncpg://" + url[len(prefix) :]
    raise ValueError(f"not a PostgreSQL URL: {url!r}")


def to_plain_url(url: str) -> str:
    """Rewrite a SQLAlchemy URL into the libpq form asyncpg.connect accepts."""
    return url.replace("postgresql+asyncpg://", "postgresql://", 1)
