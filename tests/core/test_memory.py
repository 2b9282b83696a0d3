"""The heap settings of app/platform/memory.py, seen in what the kernel counts: page faults."""

from __future__ import annotations

import mmap
import subprocess
import sys
from pathlib import Path

import pytest

from app.platform.memory import ReceiveBuffer, _libc

CHURN = """
import resource, sys
from app.platform.memory import keep_heap_top, release_freed_memory

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


def test_a_receive_buffer_gathers_chunks_as_they_came_across_its_growth() -> None:
    buffer = ReceiveBuffer(first=10)
    chunks = [bytes([n]) * n for n in range(1, 40)]
    for chunk in chunks:
        buffer.extend(chunk)
    view = buffer.view()
    assert isinstance(view, memoryview)
    assert view == b"".join(chunks) and buffer.size == len(view)
    assert ReceiveBuffer().view() == b""


class _Unresizable(mmap.mmap):
    """A mapping that cannot be resized, as on systems without mremap."""

    def resize(self, newsize: int) -> None:
        raise SystemError("mmap: resizing not available")


def test_a_receive_buffer_moves_to_a_larger_mapping_where_it_cannot_resize(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    made: list[int] = []

    def mapped(capacity: int) -> mmap.mmap:
        made.append(capacity)
        return _Unresizable(-1, capacity, flags=mmap.MAP_PRIVATE)

    monkeypatch.setattr(ReceiveBuffer, "_mapped", staticmethod(mapped))
    buffer = ReceiveBuffer(first=8)
    chunks = [bytes([n]) * 5 for n in range(10)]
    for chunk in chunks:
        buffer.extend(chunk)
    assert buffer.view() == b"".join(chunks)
    assert made == [8, 16, 32, 64]


RECEIVE = """
import resource, sys
from app.platform.memory import ReceiveBuffer

chunk = bytes(range(256)) * 256
buffer = ReceiveBuffer(1 << 20) if sys.argv[1] == "receive" else bytearray()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(1024):  # 64 MiB
    buffer.extend(chunk)
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def huge_pages_on_request() -> bool:
    """Whether the kernel gives transparent huge pages to memory that asks (madvise)."""
    setting = Path("/sys/kernel/mm/transparent_hugepage/enabled")
    return setting.exists() and "[never]" not in setting.read_text()


@pytest.mark.skipif(not huge_pages_on_request(), reason="no transparent huge pages here")
def test_a_receive_buffer_takes_far_fewer_page_faults_than_a_bytearray() -> None:
    def faults(kind: str) -> int:
        done = subprocess.run(
            [sys.executable, "-c", RECEIVE, kind], capture_output=True, text=True, check=True
        )
        return int(done.stdout)

    # A bytearray faults every 4 KiB page of its 64 MiB in (16,384 faults, more with copies).
    assert faults("bytearray") > 10_000
    assert faults("receive") < faults("bytearray") / 4
