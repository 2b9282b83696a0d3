"""Hashing the cases trees of large checks in worker processes while a finish reads on.

Hashing a tree is one SHA-256 of 65 bytes per node, and `hashlib` keeps the interpreter for
inputs that small: in a thread it starves the event loop that receives the next checks' rows
from PostgreSQL, so the scans stall while a tree is hashed. Worker processes take each large
check's joined leaves and answer its root; small trees are hashed in a thread, where a round
trip would cost more than it saves.

A worker is this module run as a program (`python -m app.platform.tree_hashing`) speaking over its
pipes: an 8-byte big-endian length, the joined 32-byte leaves; back, the 32-byte root. It
imports `app.digest.merkle` and nothing of the service (multiprocessing's spawn would import the
service's main module in every worker). A worker that fails or is interrupted mid-answer is
stopped and left out; that tree, and every tree once no worker is left, is hashed in a thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
from typing import BinaryIO

from app.digest import merkle
from app.platform.memory import release_freed_memory

logger = logging.getLogger(__name__)
_LENGTH = 8


class _Worker:
    """One worker process and its pipes."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process

    async def root(self, leaves: bytes) -> bytes:
        """Send the leaves, read the root."""
        stdin, stdout = self.process.stdin, self.process.stdout
        assert stdin is not None and stdout is not None
        stdin.write(len(leaves).to_bytes(_LENGTH, "big"))
        stdin.write(leaves)
        await stdin.drain()
        return await stdout.readexactly(32)

    async def stop(self) -> None:
        """End the worker: close its input (it exits at end of input), else kill it."""
        if self.process.returncode is None:
            if self.process.stdin is not None:
                self.process.stdin.close()
            try:
                await asyncio.wait_for(self.process.wait(), 5)
            except TimeoutError:
                self.process.kill()
                await self.process.wait()


class TreeHasher:
    """Cases-tree roots: in `workers` worker processes for trees of `min_leaves` or more, else
    (and with no worker) in a thread."""

    def __init__(self, workers: int, min_leaves: int) -> None:
        self.workers = workers
        self.min_leaves = min_leaves
        self._idle: asyncio.Queue[_Worker] = asyncio.Queue()
        self._running: list[_Worker] = []

    async def start(self) -> None:
        """Start the worker processes (in the running event loop)."""
        for _ in range(self.workers):
            process = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "app.platform.tree_hashing",
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
            )
            worker = _Worker(process)
            self._running.append(worker)
            self._idle.put_nowait(worker)

    async def root(self, leaves: bytes) -> bytes:
        """MTH of concatenated 32-byte leaf hashes (`merkle.root_of_joined`)."""
        if not self._running or len(leaves) < 32 * self.min_leaves:
            return await asyncio.to_thread(merkle.root_of_joined, leaves)
        worker = await self._idle.get()
        try:
            root = await worker.root(leaves)
        except (OSError, asyncio.IncompleteReadError, asyncio.CancelledError) as exc:
            # Its pipes are mid-message: the worker is of no further use.
            await self._drop(worker)
            if isinstance(exc, asyncio.CancelledError):
                raise
            logger.warning("a tree hashing worker failed (%r); hashing in a thread", exc)
            return await asyncio.to_thread(merkle.root_of_joined, leaves)
        self._idle.put_nowait(worker)
        return root

    async def _drop(self, worker: _Worker) -> None:
        self._running.remove(worker)
        with contextlib.suppress(ProcessLookupError):
            worker.process.kill()
        await worker.process.wait()

    async def close(self) -> None:
        """Stop every worker."""
        running, self._running = self._running, []
        for worker in running:
            await worker.stop()


def serve(source: BinaryIO, sink: BinaryIO) -> None:
    """The worker's loop: a root for each length-prefixed run of leaves, until end of input."""
    while header := source.read(_LENGTH):
        if len(header) < _LENGTH:
            return
        size = int.from_bytes(header, "big")
        leaves = source.read(size)
        if len(leaves) < size:
            return
        sink.write(merkle.root_of_joined(leaves))
        sink.flush()
        del leaves
        release_freed_memory()


if __name__ == "__main__":
    serve(sys.stdin.buffer, sys.stdout.buffer)
