"""A bundle's verdict does not depend on how its bytes were cut into gzip members.

Both verifiers read the decompressed stream in chunks of about a megabyte and hash the lines
before the trailer a run at a time (the Node verifier hashes views of each chunk without copying
them and skips a line by where the next one starts; the Python one reads ahead on a thread).
Members as small as a byte, members that end exactly at line ends and members cut at random
places move where chunks end; a padded bundle of a few megabytes makes lines span chunks. Every
layout must give each verifier the outcome of the bundle as it was written.
"""

from __future__ import annotations

import gzip
import itertools
import random
import secrets
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

import pytest

from app.bundles import stream
from app.bundles.stream import read_batches_ahead
from tests.bundle_helpers import REPO, node_verify, python_verify
from tests.bundles.edits import canonical, reseal

CASES = ["rich_pass", "multi_member_pass", "bom_fail", "edited_manifest_fail", "invalid_utf8_fail"]


def _written(case: str) -> bytes:
    return gzip.decompress((REPO / "tests" / "bundles" / case / "bundle.jsonl.gz").read_bytes())


def _padded() -> bytes:
    """rich_pass with ~3 MB of lines of an unknown kind before its trailer, resealed: one
    unknown_kind failure each, and a trailer whose sha256 holds only if every line spanning
    two chunks was hashed whole and once."""
    rng = random.Random(15)
    lines = _written("rich_pass").splitlines()
    padding = [
        canonical({"kind": "padding", "text": secrets.token_hex(rng.randrange(50, 3000))})
        for _ in range(1500)
    ]
    return b"\n".join(reseal([*lines[:-1], *padding])) + b"\n"


def _members(data: bytes, cuts: list[int]) -> bytes:
    """`data` as one gzip member per piece between consecutive cuts."""
    edges = [0, *sorted({c for c in cuts if 0 < c < len(data)}), len(data)]
    return b"".join(gzip.compress(data[a:b], mtime=0) for a, b in itertools.pairwise(edges))


def _layouts(data: bytes) -> dict[str, bytes]:
    rng = random.Random(15)
    line_ends = [i + 1 for i, byte in enumerate(data) if byte == 0x0A]
    small = len(data) < 1 << 17
    return {
        "one": gzip.compress(data, mtime=0),
        **({"bytes": _members(data, list(range(1, len(data))))} if small else {}),
        "line_ends": _members(data, line_ends),
        "before_line_ends": _members(data, [end - 1 for end in line_ends]),
        "random": _members(data, [rng.randrange(len(data)) for _ in range(len(data) // 97)]),
    }


def _essence(outcome: dict[str, Any], *, what: bool = True) -> tuple[Any, ...]:
    """The failures (with what they say, or not: the verifiers word a few differently), what
    was proven and what was not."""
    return (
        sorted(
            (f["line"], f["code"], f["what"] if what else "") for f in outcome.get("failures", [])
        ),
        outcome.get("proven"),
        outcome.get("not_proven"),
    )


def test_the_padded_bundle_spans_chunks_and_keeps_its_seal() -> None:
    data = _padded()
    assert len(data) > 3 << 20
    path_outcomes = {}
    for verify in (python_verify, node_verify):
        code, outcome = verify_bytes(verify, gzip.compress(data, mtime=0))
        assert code == 1
        # 1,500 failures: a --json document far past a pipe's 64 KiB, read whole.
        assert [f["code"] for f in outcome["failures"]] == ["unknown_kind"] * 1500
        assert outcome["proven"]["trailer_sha256"] == 1
        path_outcomes[verify.__name__] = _essence(outcome, what=False)
    assert path_outcomes["python_verify"] == path_outcomes["node_verify"]


def verify_bytes(verify: Any, data: bytes) -> tuple[int, dict[str, Any]]:
    """Run a verifier on a bundle given as bytes."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "bundle.jsonl.gz"
        path.write_bytes(data)
        result: tuple[int, dict[str, Any]] = verify(path)
        return result


@pytest.mark.parametrize("case", [*CASES, "padded"])
def test_every_member_layout_gives_the_written_outcome(case: str, tmp_path: Path) -> None:
    data = _padded() if case == "padded" else _written(case)
    written = {
        verify: verify_bytes(verify, gzip.compress(data, mtime=0))
        for verify in (python_verify, node_verify)
    }
    (python_code, python_outcome), (node_code, node_outcome) = written.values()
    assert python_code == node_code
    assert _essence(python_outcome, what=False) == _essence(node_outcome, what=False)
    for name, layout in _layouts(data).items():
        path = tmp_path / f"{name}.jsonl.gz"
        path.write_bytes(layout)
        for verify, (expected_code, expected) in written.items():
            code, outcome = verify(path)
            assert code == expected_code, (name, verify.__name__, outcome)
            assert _essence(outcome) == _essence(expected), (name, verify.__name__)


def test_a_damaged_member_late_in_the_stream_is_raised_by_the_reader(tmp_path: Path) -> None:
    data = bytearray(_layouts(_written("rich_pass"))["line_ends"])
    data[-5] ^= 0xFF  # the last member's length field
    path = tmp_path / "damaged.jsonl.gz"
    path.write_bytes(bytes(data))
    for verify in (python_verify, node_verify):
        code, outcome = verify(path)
        assert code == 1
        assert [(f["line"], f["code"]) for f in outcome["failures"]] == [(0, "gzip")], outcome


def test_a_reader_stopped_early_leaves_no_thread(tmp_path: Path) -> None:
    data = b"".join(b'{"n":%d}\n' % i for i in range(300_000))
    path = tmp_path / "lines.gz"
    path.write_bytes(gzip.compress(data, mtime=0))
    with path.open("rb") as handle:
        batches = read_batches_ahead(handle, None)
        first = next(batches)
        assert first[0] == b'{"n":0}'
        batches.close()
    assert not [t for t in threading.enumerate() if t.name == "bundle-reader"]
    with path.open("rb") as handle:
        lines = [line for batch in read_batches_ahead(handle, None) for line in batch]
    assert lines == data.splitlines()


def _lines_read(data: bytes) -> list[bytes]:
    """Every line `stream.read_batches` gives for these gzip bytes, batches flattened."""
    with tempfile.TemporaryFile() as handle:
        handle.write(data)
        handle.seek(0)
        return [line for batch in stream.read_batches(handle, None) for line in batch]


# A read holds at least the first member's 10-byte header, which the reader checks first.
@pytest.mark.parametrize("read_bytes", [10, 17, 64, 4096])
@pytest.mark.parametrize("seed", range(4))
def test_the_reader_gives_back_every_line_whatever_the_reads(
    monkeypatch: pytest.MonkeyPatch, read_bytes: int, seed: int
) -> None:
    """Lines of every length (empty, ending where a read ends, far longer than many reads),
    in several gzip members, come back as stdlib gzip and `split` give them."""
    rng = random.Random(seed)
    lines = [
        secrets.token_hex(rng.choice([0, 1, 3, 50, 2000, 40_000]) // 2).encode()
        for _ in range(rng.randint(1, 40))
    ]
    text = b"".join(line + b"\n" for line in lines)
    cut = rng.randint(0, len(text))
    data = gzip.compress(text[:cut], mtime=0) + gzip.compress(text[cut:], mtime=0)
    monkeypatch.setattr(stream, "READ_BYTES", read_bytes)
    got = _lines_read(data)
    assert got == gzip.decompress(data).split(b"\n")[:-1] == lines


def test_a_last_line_without_its_newline_comes_back_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stream, "READ_BYTES", 10)
    data = gzip.compress(b"first\n" + b"z" * 10_000, mtime=0)
    got = _lines_read(data)
    assert got == [b"first", b"z" * 10_000]


def test_the_verifier_command_imports_no_web_database_or_key_file_library() -> None:
    """`evalbook verify-bundle` starts without the web and database stack, and without the
    PEM/SSH/PKCS#12 module of cryptography (a signature check needs only Ed25519)."""
    code = (
        "import sys, app.cli.main\n"
        "bad = [m for m in sys.modules if m.split('.')[0] in ('fastapi', 'sqlalchemy',"
        " 'aiobotocore', 'asyncpg', 'starlette', 'numpy', 'pydantic')"
        " or m.startswith('cryptography.hazmat.primitives.serialization')]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
