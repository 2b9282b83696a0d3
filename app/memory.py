"""Handing freed heap memory back to the operating system after a large finish."""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
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
