"""S3-compatible object store through aiobotocore."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack
from datetime import UTC, datetime, timedelta
from typing import Any

from aiobotocore.config import AioConfig
from aiobotocore.session import get_session
from botocore.exceptions import BotoCoreError, ClientError
from botocore.handlers import add_expect_header

from app.platform.config import Settings
from app.platform.storage.base import ObjectNotFound, ObjectStoreUnavailable

_MISSING_CODES = {"404", "NoSuchKey", "NotFound"}
_STORE_ERRORS = (BotoCoreError, ClientError, OSError)
logger = logging.getLogger(__name__)
# Uploads a crash left behind are aborted by the store itself after a day (where it has
# lifecycle rules), besides the start-up sweep.
ABANDONED_UPLOAD_RULE = {
    "ID": "evalbook-abort-abandoned-bundle-uploads",
    "Filter": {"Prefix": "bundles/"},
    "Status": "Enabled",
    "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 1},
}


def _code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code"))


@contextlib.contextmanager
def _store_errors(store: S3ObjectStore, missing_key: str | None = None) -> Iterator[None]:
    """Botocore errors as the store's: ObjectNotFound for `missing_key`, else unavailable."""
    try:
        yield
    except ClientError as exc:
        if missing_key is not None and _code(exc) in _MISSING_CODES:
            raise ObjectNotFound(missing_key) from None
        raise store.outage(exc) from exc
    except (BotoCoreError, OSError) as exc:
        raise store.outage(exc) from exc


class S3Upload:
    """One S3 multipart upload; parts are numbered in the order they are written."""

    def __init__(self, store: S3ObjectStore, key: str, upload_id: str) -> None:
        self.store = store
        self.key = key
        self.upload_id = upload_id
        self.parts: list[dict[str, Any]] = []

    async def write_part(self, data: bytes) -> None:
        """Upload the next part."""
        number = len(self.parts) + 1
        try:
            async with self.store.deadline(len(data)):
                answer = await self.store.client.upload_part(
                    Bucket=self.store.bucket,
                    Key=self.key,
                    UploadId=self.upload_id,
                    PartNumber=number,
                    Body=data,
                )
        except _STORE_ERRORS as exc:
            raise self.store.outage(exc) from exc
        self.parts.append({"PartNumber": number, "ETag": answer["ETag"]})

    async def complete(self) -> None:
        """Assemble the parts into the object."""
        try:
            async with self.store.deadline():
                await self.store.client.complete_multipart_upload(
                    Bucket=self.store.bucket,
                    Key=self.key,
                    UploadId=self.upload_id,
                    MultipartUpload={"Parts": self.parts},
                )
        except _STORE_ERRORS as exc:
            raise self.store.outage(exc) from exc

    async def abort(self) -> None:
        """Abort the upload (an upload already gone is fine)."""
        try:
            async with self.store.deadline():
                await self.store.client.abort_multipart_upload(
                    Bucket=self.store.bucket, Key=self.key, UploadId=self.upload_id
                )
        except ClientError as exc:
            if _code(exc) not in ("NoSuchUpload", "404"):
                raise self.store.outage(exc) from exc
        except (BotoCoreError, OSError) as exc:
            raise self.store.outage(exc) from exc


class S3ObjectStore:
    """One bucket of an S3-compatible endpoint; the client lives as long as the app."""

    def __init__(
        self,
        client: Any,
        bucket: str,
        outage_seconds: int = 1,
        min_bytes_per_second: float = 1 << 20,
    ) -> None:
        self.client = client
        self.bucket = bucket
        # How long a call may take to find the store away: every attempt's connect and read
        # timeouts. An outage's 503 says this in its Retry-After.
        self.outage_seconds = outage_seconds
        # The slowest a store may take the bytes it is sent before the call is given up.
        self.min_bytes_per_second = min_bytes_per_second

    def deadline(self, sent_bytes: int = 0) -> asyncio.Timeout:
        """The deadline of one whole call that sends `sent_bytes`: botocore's timeouts bound
        each connect and each read, not a send that a store which stopped reading leaves
        waiting for ever. Its TimeoutError (an OSError) is the store's outage."""
        return asyncio.timeout(self.outage_seconds + sent_bytes / self.min_bytes_per_second)

    def outage(self, exc: BaseException) -> ObjectStoreUnavailable:
        """The store's error for a failed call, with the Retry-After its timeouts bound."""
        return ObjectStoreUnavailable(str(exc), retry_after=self.outage_seconds)

    @classmethod
    async def open(cls, settings: Settings, stack: AsyncExitStack) -> S3ObjectStore:
        """Create the client inside `stack` (closed with the lifespan) and ensure the bucket."""
        config = AioConfig(
            # botocore >= 1.36 sends CRC checksums some S3-compatible stores refuse.
            request_checksum_calculation="when_required",
            response_checksum_validation="when_required",
            retries={"total_max_attempts": settings.s3_max_attempts, "mode": "standard"},
            connect_timeout=settings.s3_connect_timeout_seconds,
            read_timeout=settings.s3_read_timeout_seconds,
        )
        client = await stack.enter_async_context(
            get_session().create_client(
                "s3",
                endpoint_url=settings.s3_endpoint_url,
                region_name=settings.s3_region,
                aws_access_key_id=settings.s3_access_key_id,
                aws_secret_access_key=settings.s3_secret_access_key,
                config=config,
            )
        )
        # botocore asks for "100 Continue" before a PUT's body; aiohttp waits for it with no
        # timeout, so a store that hangs would hold a write for ever (bodies here are small
        # enough to send outright).
        client.meta.events.unregister("before-call.s3", add_expect_header)
        store = cls(
            client,
            settings.s3_bucket or "evalbook",
            settings.store_outage_seconds,
            settings.s3_min_bytes_per_second,
        )
        await store.ensure_bucket()
        return store

    async def ensure_bucket(self) -> None:
        """Create the bucket when the endpoint does not have it yet."""
        try:
            await self.client.head_bucket(Bucket=self.bucket)
        except ClientError as exc:
            if str(exc.response.get("Error", {}).get("Code")) not in _MISSING_CODES:
                raise self.outage(exc) from exc
            await self.client.create_bucket(Bucket=self.bucket)
            await self._add_lifecycle_rule()
        except (BotoCoreError, OSError) as exc:
            raise self.outage(exc) from exc

    async def _add_lifecycle_rule(self) -> None:
        """On a bucket we created: abort abandoned bundle uploads after a day."""
        try:
            await self.client.put_bucket_lifecycle_configuration(
                Bucket=self.bucket, LifecycleConfiguration={"Rules": [ABANDONED_UPLOAD_RULE]}
            )
        except _STORE_ERRORS as exc:
            logger.warning("the store has no lifecycle rules (%s); relying on the sweep", exc)

    async def put(self, key: str, data: bytes, content_type: str) -> None:
        """Store bytes under a key."""
        try:
            async with self.deadline(len(data)):
                await self.client.put_object(
                    Bucket=self.bucket, Key=key, Body=data, ContentType=content_type
                )
        except (BotoCoreError, ClientError, OSError) as exc:
            raise self.outage(exc) from exc

    async def get(self, key: str) -> bytes:
        """Read an object."""
        with _store_errors(self, key):
            response = await self.client.get_object(Bucket=self.bucket, Key=key)
            async with response["Body"] as body:
                data: bytes = await body.read()
                return data

    async def exists(self, key: str) -> bool:
        """True when the object exists."""
        try:
            await self.client.head_object(Bucket=self.bucket, Key=key)
            return True
        except ClientError as exc:
            if str(exc.response.get("Error", {}).get("Code")) in _MISSING_CODES:
                return False
            raise self.outage(exc) from exc
        except (BotoCoreError, OSError) as exc:
            raise self.outage(exc) from exc

    async def delete(self, key: str) -> None:
        """Remove an object (S3 answers success when absent)."""
        try:
            async with self.deadline():
                await self.client.delete_object(Bucket=self.bucket, Key=key)
        except (BotoCoreError, ClientError, OSError) as exc:
            raise self.outage(exc) from exc

    async def ping(self) -> None:
        """HEAD the bucket."""
        try:
            async with self.deadline():
                await self.client.head_bucket(Bucket=self.bucket)
        except (BotoCoreError, ClientError, OSError) as exc:
            raise self.outage(exc) from exc

    async def begin_upload(self, key: str, content_type: str) -> S3Upload:
        """Start a multipart upload."""
        try:
            async with self.deadline():
                answer = await self.client.create_multipart_upload(
                    Bucket=self.bucket, Key=key, ContentType=content_type
                )
        except _STORE_ERRORS as exc:
            raise self.outage(exc) from exc
        return S3Upload(self, key, answer["UploadId"])

    async def sweep_uploads(self, prefix: str, older_than: timedelta) -> int:
        """Abort multipart uploads under `prefix` initiated before now - `older_than`."""
        cutoff = datetime.now(UTC) - older_than
        aborted = 0
        try:
            paginator = self.client.get_paginator("list_multipart_uploads")
            async for page in paginator.paginate(Bucket=self.bucket, Prefix=prefix):
                for upload in page.get("Uploads", []):
                    if upload["Initiated"] < cutoff:
                        await S3Upload(self, upload["Key"], upload["UploadId"]).abort()
                        aborted += 1
        except _STORE_ERRORS as exc:
            raise self.outage(exc) from exc
        return aborted

    async def stream(self, key: str, chunk_bytes: int = 1 << 20) -> AsyncIterator[bytes]:
        """Read an object in chunks."""
        with _store_errors(self, key):
            response = await self.client.get_object(Bucket=self.bucket, Key=key)
        async with response["Body"] as body:
            with _store_errors(self):
                async for chunk in body.iter_chunks(chunk_bytes):
                    yield chunk

    async def size(self, key: str) -> int:
        """The object's size from a HEAD."""
        with _store_errors(self, key):
            answer = await self.client.head_object(Bucket=self.bucket, Key=key)
        return int(answer["ContentLength"])
