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
