"""Aborting multipart uploads that a failed build leaves behind, even through an outage."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from datetime import timedelta

from tenacity import (
    AsyncRetrying,
    retry_if_exception_type,
    stop_after_delay,
    wait_random_exponential,
)

from app.platform.storage import MultipartUpload, ObjectStore, ObjectStoreUnavailable
from app.platform.storage.spool import SpooledParts

logger = logging.getLogger(__name__)
BUNDLE_PREFIX = "bundles/"


class UploadJanitor:
    """Aborts failed uploads: at once when the store answers, else retried in the background
    (full-jitter backoff up to a horizon); a start-up sweep and a bucket lifecycle rule catch
    what a crash leaves."""

    def __init__(self, horizon_seconds: float, backoff_cap_seconds: float) -> None:
        self.horizon_seconds = horizon_seconds
        self.backoff_cap_seconds = backoff_cap_seconds
        self.tasks: set[asyncio.Task[None]] = set()

    async def abort(self, upload: MultipartUpload) -> None:
        """Abort now if possible; never raises, survives the caller's cancellation."""
        try:
            await asyncio.shield(self._try_once(upload))
        except (asyncio.CancelledError, Exception):
            task = asyncio.create_task(self._keep_trying(upload))
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)

    async def _try_once(self, upload: MultipartUpload) -> None:
        await upload.abort()

    async def _keep_trying(self, upload: MultipartUpload) -> None:
        try:
            async for attempt in AsyncRetrying(
                retry=retry_if_exception_type(ObjectStoreUnavailable),
                wait=wait_random_exponential(multiplier=0.2, max=self.backoff_cap_seconds),
                stop=stop_after_delay(self.horizon_seconds),
                reraise=True,
            ):
                with attempt:
                    await upload.abort()
            logger.info("aborted the upload of %s after the store came back", upload.key)
        except Exception as exc:  # the sweep and the lifecycle rule remain
            logger.warning("could not abort the upload of %s: %s", upload.key, exc)

    async def wait_idle(self) -> None:
        """Wait for background aborts (tests, shutdown)."""
        while self.tasks:
            await asyncio.gather(*list(self.tasks), return_exceptions=True)

    def close(self) -> None:
        """Stop background retries (the sweep takes over at the next start)."""
        for task in self.tasks:
            task.cancel()


async def sweep(store: ObjectStore, older_than: timedelta) -> int:
    """Abort bundle uploads older than `older_than` (left by a crash); logs, never raises."""
    try:
        aborted = await store.sweep_uploads(BUNDLE_PREFIX, older_than)
    except ObjectStoreUnavailable as exc:
        logger.warning("could not sweep abandoned uploads: %s", exc)
        return 0
    if aborted:
        logger.info("aborted %d abandoned bundle uploads", aborted)
    return aborted


class SpooledUpload:
    """A multipart upload fed from a spool while the spool fills: its parts travel as they are
    written, and the upload completes only when `finish` says the bytes may be stored."""

    def __init__(self, spool: SpooledParts, upload: MultipartUpload, janitor: UploadJanitor):
        self.upload = upload
        self.janitor = janitor
        self.sending = asyncio.create_task(spool.send_to(upload), name=f"send {upload.key}")
        self.abandoned = False

    async def finish(self, seconds: float) -> None:
        """Wait, within `seconds`, for the last parts and complete the upload (503 past them);
        a failure aborts it."""
        try:
            async with asyncio.timeout(seconds):
                await self.sending
                await self.upload.complete()
        except BaseException as exc:
            await self.abandon()
            if isinstance(exc, TimeoutError):
                raise ObjectStoreUnavailable(
                    f"the bundle did not reach the object store within {seconds:g} s"
                ) from exc
            raise

    async def abandon(self) -> None:
        """Stop sending and abort the upload (once; never raises)."""
        if self.abandoned:
            return
        self.abandoned = True
        self.sending.cancel()
        with contextlib.suppress(BaseException):
            await self.sending
        await self.janitor.abort(self.upload)
