"""The public keys document (GET /.well-known/evalbook/keys)."""

from __future__ import annotations

from typing import Literal

from app.schemas.base import AnswerModel


class PublicKey(AnswerModel):
    """One Ed25519 public key: `keyid` is sha256 of its 32 raw bytes (base64 here)."""

    keyid: str
    alg: Literal["ed25519"]
    public_key: str
    status: Literal["active", "retired"]
    created_at: str
    retired_at: str | None


class LogKey(AnswerModel):
    """The transparency log's note verifier key (C2SP signed-note, Ed25519)."""

    name: str
    key_hash: str
    public_key: str
    vkey: str


class PublicKeys(AnswerModel):
    """Every key, active and retired, and the transparency log's note key."""

    keys: list[PublicKey]
    log: LogKey | None = None
