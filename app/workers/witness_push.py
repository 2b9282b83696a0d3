"""Pushing checkpoints to witnesses (C2SP tlog-witness, https://c2sp.org/tlog-witness): each
witness the log has a submission prefix for (`EVALBOOK_LOG_WITNESS_URLS`) is asked to cosign the
newest checkpoint with `add-checkpoint`, with a consistency proof from the size it last
cosigned; the cosignature it answers with is kept as a posted one would be. A witness that is
down is asked again later (backing off); the pull witness (`evalbook witness`) works as before."""

from __future__ import annotations

import base64
import logging
import time
from dataclasses import dataclass, field

import httpx

from app.domain.errors import ProblemError
from app.platform.db import reading
from app.services.transparency import TransparencyLog
from app.tlog import tiles

logger = logging.getLogger(__name__)
SIZE_TYPE = "text/x.tlog.size"
BACKOFF_CAP_SECONDS = 60.0


@dataclass
class _Behind:
    """What the log knows of one witness: the size it cosigned, when to ask it again."""

    cosigned: int | None = None
    retry_at: float = 0.0
    failures: int = 0


@dataclass
class WitnessPusher:
    """Asks the configured witnesses to cosign the log's newest checkpoint."""

    log: TransparencyLog
    http: httpx.AsyncClient
    urls: dict[str, str]
    known: dict[str, _Behind] = field(default_factory=dict)

    async def push(self) -> None:
        """Ask each witness behind the newest checkpoint (and not backing off) to cosign it."""
        now = time.monotonic()
        latest = await self.log.checkpoint()
        if latest is None:
            return
        for name, url in self.urls.items():
            behind = self.known.setdefault(name, _Behind())
            if behind.cosigned == latest[0] or behind.retry_at > now:
                continue
            try:
                await self._ask(name, url, latest[0], latest[2], behind)
                behind.failures = 0
            except (httpx.HTTPError, WitnessRefused, ProblemError) as exc:
                behind.failures += 1
                delay = min(BACKOFF_CAP_SECONDS, 2.0**behind.failures)
                behind.retry_at = now + delay
                logger.warning("witness %s did not cosign size %d: %s", name, latest[0], exc)

    async def _ask(self, name: str, url: str, size: int, note: bytes, behind: _Behind) -> None:
        """One add-checkpoint exchange (two when the witness names the size it holds)."""
        old = behind.cosigned or 0
        for _ in range(2):
            proof = await self._proof(old, size)
            body = f"old {old}\n".encode() + b"".join(base64.b64encode(p) + b"\n" for p in proof)
            answer = await self.http.post(
                f"{url.rstrip('/')}/add-checkpoint", content=body + b"\n" + note
            )
            if answer.status_code == 409 and answer.headers.get("content-type", "").startswith(
                SIZE_TYPE
            ):
                held = answer.text.strip()
                if not held.isascii() or not held.isdigit() or int(held) > size or int(held) == old:
                    raise WitnessRefused(f"it holds size {held!r}; the log is at {size}")
                old = int(held)
                continue
            if answer.status_code != 200:
                raise WitnessRefused(f"HTTP {answer.status_code}: {answer.text[:200]}")
            text = note.split(b"\n\n", 1)[0] + b"\n\n"
            await self.log.add_cosignatures(text + answer.content)
            behind.cosigned = size
            logger.info("witness %s cosigned size %d", name, size)
            return
        raise WitnessRefused("the witness named another size twice")

    async def _proof(self, old: int, size: int) -> list[bytes]:
        """The RFC 6962 consistency proof from `old` to `size`, from the stored tree."""
        if old == 0 or old == size:
            return []
        async with reading(self.log.pool) as connection:
            return await tiles.consistency_proof(self.log.elements_on(connection), old, size)


class WitnessRefused(Exception):
    """A witness answered, but not with a cosignature."""
