"""Running one piece of work in a program of its own (`python -m <module>`), apart from the
service's interpreter.

Work that holds the interpreter for seconds (hashing a million leaves, 65 bytes at a time,
which `hashlib` does without letting go of it) slows every request of the process while it
runs, on the event loop or in a thread alike: each of a request's round trips waits for the
interpreter. In a process of its own it takes a core and nothing else.

The program reads its request from standard input (so nothing secret shows in the process
list) and writes its answer to standard output; any other exit is a failure the caller decides
about. A cancelled caller stops the program.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys


class ApartFailed(RuntimeError):
    """The program could not be started, exited with a failure, or answered nothing."""


async def run_apart(module: str, request: bytes) -> bytes:
    """The standard output of `python -m module` given `request` on its standard input."""
    try:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            module,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
    except OSError as exc:
        raise ApartFailed(f"{module} could not be started: {exc!r}") from exc
    try:
        answer, errors = await process.communicate(request)
    except OSError as exc:
        await _stop(process)
        raise ApartFailed(f"{module}'s pipes broke: {exc!r}") from exc
    except BaseException:
        # Cancelled: the program's work is wanted no more.
        await _stop(process)
        raise
    if process.returncode != 0 or not answer:
        tail = errors.decode(errors="replace").strip().splitlines()[-1:] or ["no output"]
        raise ApartFailed(f"{module} exited with {process.returncode}: {tail[0]}")
    return answer


async def _stop(process: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError):
        process.kill()
    await process.wait()
