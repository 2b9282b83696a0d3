"""Memory of large finishes: freed heap handed back to the operating system, and receive
buffers that fault in huge pages rather than 4 KiB ones."""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import logging
import mmap
from functools import cache
from typing import Any

logger = logging.getLogger(__name__)


@cache
def _libc() -> Any:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        libc = ctypes.CDLL(name)
        return libc if hasattr(libc, "malloc_trim") else None
    except OSError:
        return None


def release_freed_memory() -> bool:
    """Return the heap's free pages to the OS (glibc's malloc_trim); False where unavailable.

    A finish decodes hundreds of megabytes of columns; glibc keeps freed blocks below its
    (growing) mmap threshold in the heap, so without this the service's RSS stays at its peak.
    """
    libc = _libc()
    if libc is None:
        return False
    libc.malloc_trim(0)
    return True


# mallopt(3) parameters.
_M_TRIM_THRESHOLD = -1
_M_TOP_PAD = -2
# Free memory kept at the top of the heap before glibc gives it back, and what each growth
# asks for beyond the request.
HEAP_TRIM_THRESHOLD = 8 * 1024 * 1024
HEAP_TOP_PAD = 2 * 1024 * 1024


def keep_heap_top() -> bool:
    """Let the heap keep its free top (glibc's mallopt); False where unavailable.

    Ingestion allocates and frees a request's worth of small objects again and again; with
    glibc's defaults each free that leaves 128 KiB at the top of the heap hands it back, and the
    next allocations fault it in again page by page (about 100,000 page faults a second under
    the ingest benchmark, a fifth of the service's time in the kernel). Setting it also holds
    glibc's mmap threshold at 128 KiB (glibc no longer raises it), so large blocks are mapped
    and unmapped each time and leave the RSS when freed. A large finish still returns the rest
    through `release_freed_memory`.
    """
    libc = _libc()
    if libc is None or not hasattr(libc, "mallopt"):
        return False
    libc.mallopt(_M_TRIM_THRESHOLD, HEAP_TRIM_THRESHOLD)
    libc.mallopt(_M_TOP_PAD, HEAP_TOP_PAD)
    return True


# What a receive buffer maps at first; it doubles as it fills.
FIRST_MAP_BYTES = 16 * 1024 * 1024


class ReceiveBuffer:
    """A growing byte buffer in anonymous memory that asks the kernel for huge pages.

    Finish gathers each check's binary COPY answer (tens of megabytes at ten million cases) in
    one buffer. A bytearray grown chunk by chunk takes a fresh 4 KiB page fault every 4 KiB,
    and under a virtual machine those faults cost more than copying the bytes; with
    MADV_HUGEPAGE the kernel maps 2 MiB at a time where it can. Unmapped when the buffer and
    every view of it are gone, so the memory leaves the process at once.
    """

    def __init__(self, first: int = FIRST_MAP_BYTES) -> None:
        self._map = self._mapped(first)
        self.size = 0

    @staticmethod
    def _mapped(capacity: int) -> mmap.mmap:
        # Private: shared anonymous memory is shmem, which takes huge pages by another setting.
        mapped = mmap.mmap(-1, capacity, flags=mmap.MAP_PRIVATE)
        advice = getattr(mmap, "MADV_HUGEPAGE", None)
        if advice is not None:
            with contextlib.suppress(OSError):  # a kernel without transparent huge pages
                mapped.madvise(advice)
        return mapped

    def extend(self, chunk: bytes) -> None:
        """Append `chunk`, the mapping doubled when it does not fit."""
        end = self.size + len(chunk)
        if end > len(self._map):
            self._grow(max(end, 2 * len(self._map)))
        self._map[self.size : end] = chunk
        self.size = end

    def _grow(self, capacity: int) -> None:
        try:
            # Linux moves the mapping's pages (mremap), keeping their advice: nothing copied.
            self._map.resize(capacity)
        except (OSError, SystemError, ValueError):  # where anonymous maps cannot be resized
            larger = self._mapped(capacity)
            with memoryview(self._map) as old:
                larger[: self.size] = old[: self.size]
            self._map.close()
            self._map = larger

    def view(self) -> memoryview:
        """The bytes written so far, without a copy."""
        return memoryview(self._map)[: self.size]
