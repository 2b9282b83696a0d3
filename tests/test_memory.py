"""The heap settings of app/memory.py, seen in what the kernel counts: page faults."""

from __future__ import annotations

import subprocess
import sys

import pytest

from app.memory import _libc

CHURN = """
import resource, sys
from app.memory import keep_heap_top, release_freed_memory

if sys.argv[1] == "keep":
    assert keep_heap_top()


def churn():
    # Blocks past pymalloc's 512 bytes come from glibc's heap; each round frees them all.
    for _ in range(50):
        blocks = [bytes(1000) for _ in range(5000)]
        del blocks


churn()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
churn()
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def faults(mode: str) -> int:
    """Minor page faults of 50 rounds of allocating and freeing 5 MB, after a first 50."""
    done = subprocess.run(
        [sys.executable, "-c", CHURN, mode], capture_output=True, text=True, check=True
    )
    return int(done.stdout)


@pytest.mark.skipif(_libc() is None, reason="glibc only (mallopt, malloc_trim)")
def test_keeping_the_heap_top_stops_faulting_freed_memory_back_in() -> None:
    # glibc's default hands the freed top back and faults it in again every round (~1,200
    # pages a round); kept, the same rounds reuse it.
    assert faults("default") > 10_000
    assert faults("keep") < 1_000
