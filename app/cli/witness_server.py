"""`evalbook witness --serve HOST:PORT`: a witness speaking C2SP tlog-witness
(https://c2sp.org/tlog-witness). A log POSTs `<prefix>/add-checkpoint` with the size the witness
last cosigned, a consistency proof from it and the new checkpoint; the witness checks the log's
signature (the keys it was given), that the old size is the one it holds, and the proof, keeps
the new checkpoint (atomically with the check) and answers with its cosignature line.

Standard library HTTP server: a witness is a small, separate program an operator may run on
another host; it needs nothing of the service."""

from __future__ import annotations

import base64
import json
import os
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from app.digest import merkle
from app.tlog import checkpoint as checkpoints
from app.tlog import note as notes

MAX_BODY = 64 * 1024
MAX_PROOF_LINES = 63
OLD_LINE = re.compile(r"old (0|[1-9][0-9]*)")
SIZE_TYPE = "text/x.tlog.size"


class Refusal(Exception):
    """An add-checkpoint request refused: the status, and a body (text/plain unless given)."""

    def __init__(self, status: int, body: str, content_type: str = "text/plain; charset=utf-8"):
        super().__init__(body)
        self.status = status
        self.body = body
        self.content_type = content_type


@dataclass
class Witness:
    """A witness's key, the logs it serves (origin -> the log's verifier key) and the latest
    checkpoint it cosigned of each (origin -> {size, root}), kept in a state file."""

    name: str
    key: Ed25519PrivateKey
    logs: dict[str, notes.Verifier]
    state_path: Path
    clock: Any = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    def _state(self) -> dict[str, dict[str, Any]]:
        if not self.state_path.exists():
            return {}
        state: dict[str, dict[str, Any]] = json.loads(self.state_path.read_text())
        return state

    def _keep(self, state: dict[str, dict[str, Any]]) -> None:
        temporary = self.state_path.with_suffix(".tmp")
        temporary.write_text(json.dumps(state, indent=2, sort_keys=True))
        os.replace(temporary, self.state_path)

    def _signed_checkpoint(self, note: bytes) -> tuple[str, checkpoints.Checkpoint]:
        """The note's text and checkpoint, signed by a log this witness serves, or a Refusal."""
        try:
            text, _ = notes.split(note)
            stated = checkpoints.parse(text)
        except (notes.NoteError, checkpoints.CheckpointError) as exc:
            raise Refusal(400, f"not a checkpoint: {exc}") from None
        verifier = self.logs.get(stated.origin)
        if verifier is None:
            raise Refusal(404, f"no log of origin {stated.origin!r} is known here")
        try:
            notes.verify(note, verifier)
        except notes.NoteError as exc:
            raise Refusal(403, f"the log's signature does not verify: {exc}") from None
        return text, stated

    def add_checkpoint(self, body: bytes) -> bytes:
        """The cosignature line(s) of the checkpoint `body` submits, or a Refusal."""
        old, proof, note = _parse(body)
        text, stated = self._signed_checkpoint(note)
        if old > stated.size:
            raise Refusal(400, f"old size {old} is larger than the checkpoint's {stated.size}")
        if old == 0 and proof:
            raise Refusal(400, "a proof from size 0 is empty")
        with self.lock:
            state = self._state()
            held = state.get(stated.origin, {"size": 0, "root": None})
            if old != held["size"]:
                raise Refusal(409, f"{held['size']}\n", SIZE_TYPE)
            root = None if held["root"] is None else base64.b64decode(held["root"])
            if old == stated.size and root is not None and root != stated.root:
                raise Refusal(409, f"{held['size']}\n", SIZE_TYPE)
            if 0 < old < stated.size and (
                root is None
                or merkle.root_from_consistency(old, root, stated.size, proof) != stated.root
            ):
                raise Refusal(422, "the consistency proof does not lead to the checkpoint's root")
            state[stated.origin] = {
                "size": stated.size,
                "root": base64.b64encode(stated.root).decode(),
            }
            self._keep(state)
        timestamp = int(self.clock() if self.clock else _now())
        return (notes.cosign(text, self.name, self.key, timestamp).line()).encode()


def _now() -> float:
    import time

    return time.time()


def _parse(body: bytes) -> tuple[int, list[bytes], bytes]:
    """(old size, proof hashes, checkpoint note) of a request body, or a 400 Refusal."""
    end = body.find(b"\n\n")
    if end < 0:
        raise Refusal(400, "the body is an old size line, proof lines, an empty line, a note")
    try:
        lines = body[:end].decode("ascii").split("\n")
    except UnicodeDecodeError:
        raise Refusal(400, "the old size and proof lines are ASCII") from None
    matched = OLD_LINE.fullmatch(lines[0])
    if matched is None:
        raise Refusal(400, "the first line is `old <size>`")
    if len(lines) - 1 > MAX_PROOF_LINES:
        raise Refusal(400, f"at most {MAX_PROOF_LINES} proof lines")
    proof = []
    for line in lines[1:]:
        try:
            digest = base64.b64decode(line, validate=True)
        except ValueError:
            digest = b""
        if len(digest) != 32:
            raise Refusal(400, "each proof line is one hash in base64")
        proof.append(digest)
    return int(matched.group(1)), proof, body[end + 2 :]


def serve(witness: Witness, host: str, port: int, prefix: str = "") -> ThreadingHTTPServer:
    """A server answering `POST <prefix>/add-checkpoint` (not started: call serve_forever)."""
    path = prefix.rstrip("/") + "/add-checkpoint"

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _answer(self, status: int, body: bytes, content_type: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            if self.path != path:
                self._answer(404, b"not found\n", "text/plain; charset=utf-8")
                return
            if not 0 < length <= MAX_BODY:
                self.close_connection = True
                self._answer(400, b"a body of at most 64 KiB\n", "text/plain; charset=utf-8")
                return
            try:
                lines = witness.add_checkpoint(self.rfile.read(length))
            except Refusal as refusal:
                self._answer(refusal.status, refusal.body.encode(), refusal.content_type)
                return
            self._answer(200, lines, "text/plain; charset=utf-8")

        def log_message(self, format: str, *args: Any) -> None:
            """Quiet: the witness prints what it cosigns, not every request."""

    return ThreadingHTTPServer((host, port), Handler)


def run(args: Any) -> int:
    """`evalbook witness --serve HOST:PORT`: serve add-checkpoint until interrupted."""
    import sys

    from app.digest.signing import load_private_key

    if not args.state or not args.log_key:
        print("evalbook witness --serve: --state and --log-key are required", file=sys.stderr)
        return 64
    host, _, port = args.serve.rpartition(":")
    logs = {verifier.name: verifier for verifier in map(notes.parse_vkey, args.log_key)}
    witness = Witness(args.name, load_private_key(Path(args.key)), logs, Path(args.state))
    server = serve(witness, host.strip("[]") or "127.0.0.1", int(port), args.prefix or "")
    public = notes.raw(witness.key.public_key())
    vkey = notes.Verifier(args.name, public, notes.COSIGNATURE_V1).vkey()
    print(f"evalbook witness: {vkey} serving http://{args.serve}{args.prefix or ''}/add-checkpoint")
    sys.stdout.flush()
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0
