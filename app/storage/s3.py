"""S3-compatible object store through aiobotocore."""

from __future__ import annotations

from contextlib import AsyncExitStack
from typing import Any

from aiobotocore.config import AioConfig
from aiobotocore.session import get_session
from botocore.exceptions import BotoCoreError, ClientError

from app.config import Settings
from app.storage.base import ObjectNotFound, ObjectStoreUnavailable

_MISSING_CODES = {"404", "NoSuchKey", "NotFound"}


class S3ObjectStore:
    """One bucket of an S3-compatible endpoint; the client lives as long as the app."""

    def __init__(self, client: Any, bucket: str) -> None:
        self.client = client
        self.bucket = bucket

    @classmethod
    async def open(cls, settings: Settings, stack: AsyncExitStack) -> S3ObjectStore:
        """Create the client inside `stack` (closed with the lifespan) and ensure the bucket."""
        config = AioConfig(
            # botocore >= 1.36 sends CRC checksums some S3-compatible stores refuse.
            request_checksum_calculation="when_required",
            response_checksum_validation="when_required",
            retries={"max_attempts": 3, "mode": "standard"},
            connect_timeout=5,
            read_timeout=30,
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
        store = cls(client, settings.s3_bucket or "evalbook")
        await store.ensure_bucket()
        return store

    async def ensure_bucket(self) -> None:
        """Create the bucket when the endpoint does not have it yet."""
        try:
            await self.client.head_bucket(Bucket=self.bucket)
        except ClientError as exc:
            if str(exc.response.get("Error", {}).get("Code")) not in _MISSING_CODES:
                raise ObjectStoreUnavailable(str(exc)) from exc
            await self.client.create_bucket(Bucket=self.bucket)
        except (BotoCoreError, OSError) as exc:
            raise ObjectStoreUnavailable(str(exc)) from exc

    async def put(self, key: str, data: bytes, content_type: str) -> None:
        """Store bytes under a key."""
        try:
            await self.client.put_object(
                Bucket=self.bucket, Key=key, Body=data, ContentType=content_type
            )
        except (BotoCoreError, ClientError, OSError) as exc:
            raise ObjectStoreUnavailable(str(exc)) from exc

    async def get(self, key: str) -> bytes:
        """Read an object."""
        try:
            response = await self.client.get_object(Bucket=self.bucket, Key=key)
            async with response["Body"] as body:
                data: bytes = await body.read()
                return data
        except ClientError as exc:
            if str(exc.response.get("Error", {}).get("Code")) in _MISSING_CODES:
                raise ObjectNotFound(key) from None
            raise ObjectStoreUnavailable(str(exc)) from exc
        except (BotoCoreError, OSError) as exc:
            raise ObjectStoreUnavailable(str(exc)) from exc

    async def exists(self, key: str) -> bool:
        """True when the object exists."""
        try:
            await self.client.head_object(Bucket=self.bucket, Key=key)
            return True
        except ClientError as exc:
            if str(exc.response.get("Error", {}).get("Code")) in _MISSING_CODES:
                return False
            raise ObjectStoreUnavailable(str(exc)) from exc
        except (BotoCoreError, OSError) as exc:
            raise ObjectStoreUnavailable(str(exc)) from exc

    async def delete(self, key: str) -> None:
        """Remove an object (S3 answers success when absent)."""
        try:
            await self.client.delete_object(Bucket=self.bucket, Key=key)
        except (BotoCoreError, ClientError, OSError) as exc:
            raise ObjectStoreUnavailable(str(exc)) from exc

    async def ping(self) -> None:
        """HEAD the bucket."""
        try:
            await self.client.head_bucket(Bucket=self.bucket)
        except (BotoCoreError, ClientError, OSError) as exc:
            raise ObjectStoreUnavailable(str(exc)) from exc
