"""A small typed HTTP client of the service, for the command line (gate, importers).

Base URL and token from `EVALBOOK_URL` / `EVALBOOK_TOKEN` (or arguments). A 503 is retried
after its `Retry-After`; a write that may be retried carries an `Idempotency-Key`, so a retry
never duplicates anything."""

from __future__ import annotations

import os
import re
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

DEFAULT_URL = "http://127.0.0.1:8000"


class ClientError(Exception):
    """The service refused a request (a problem document), or could not be reached."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


@dataclass
class EvalBookClient:
    """Calls the service's API with one token."""

    base_url: str
    token: str
    retries: int = 5
    max_wait_seconds: float = 30.0
    timeout_seconds: float = 60.0

    @classmethod
    def from_environment(cls, url: str | None = None, token: str | None = None) -> EvalBookClient:
        """The client `EVALBOOK_URL` and `EVALBOOK_TOKEN` name (arguments win); without a
        token, the demo token `evalbook serve` keeps for the local embedded service."""
        base_url = (url or os.environ.get("EVALBOOK_URL") or DEFAULT_URL).rstrip("/")
        token = token or os.environ.get("EVALBOOK_TOKEN") or demo_token(base_url)
        if not token:
            raise ClientError(
                "no token: pass --token or set EVALBOOK_TOKEN (a local `evalbook serve` keeps "
                f"its demo token in {demo_token_path()})",
                status=401,
            )
        return cls(base_url, token)

    def request(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: dict[str, Any] | None = None,
        idempotency_key: str | None = None,
        content: bytes | Callable[[], Iterator[bytes]] | None = None,
        content_type: str | None = None,
        raw: bool = False,
    ) -> Any:
        """The answer's JSON (its bytes with `raw`); 503 and connection failures retried
        (honouring Retry-After).

        `content` is bytes, or a function giving the body's chunks afresh for each attempt."""
        headers = {"Authorization": f"Bearer {self.token}"}
        if idempotency_key is not None:
            headers["Idempotency-Key"] = idempotency_key
        if content_type is not None:
            headers["Content-Type"] = content_type
        with httpx.Client(base_url=self.base_url, timeout=self.timeout_seconds) as http:
            for attempt in range(self.retries + 1):
                body = content() if callable(content) else content
                try:
                    answer = http.request(
                        method, path, json=json, params=params, headers=headers, content=body
                    )
                except httpx.TransportError as exc:
                    if attempt == self.retries:
                        raise ClientError(f"{self.base_url} cannot be reached: {exc}") from exc
                    time.sleep(min(2**attempt, self.max_wait_seconds))
                    continue
                if answer.status_code == 503 and attempt < self.retries:
                    time.sleep(self._retry_after(answer, attempt))
                    continue
                if answer.status_code >= 400:
                    raise ClientError(_problem(answer), answer.status_code)
                if raw:
                    return answer.content
                return answer.json() if answer.content else None
        raise AssertionError("unreachable")

    def fetch(self, path: str, params: dict[str, Any] | None = None) -> bytes:
        """A GET's body as bytes (YAML, XML, a DSSE envelope), retried as `request` is."""
        data: bytes = self.request("GET", path, params=params, raw=True)
        return data

    def _retry_after(self, answer: httpx.Response, attempt: int) -> float:
        value = answer.headers.get("retry-after", "")
        seconds = float(value) if value.isdigit() else float(2**attempt)
        return min(seconds, self.max_wait_seconds)

    def for_subject(self, digest: str) -> list[dict[str, Any]]:
        """The current, unexpired gate reports about a subject."""
        answer = self.request(
            "GET", "/evaluations/api/reports/forSubject", params={"digest": digest}
        )
        reports: list[dict[str, Any]] = answer["reports"]
        return reports

    def start_evaluation(self, body: dict[str, Any], key: str | None = None) -> dict[str, Any]:
        """Start an evaluation; retried safely under one Idempotency-Key."""
        started: dict[str, Any] = self.request(
            "POST", "/api/v1/evaluations", json=body, idempotency_key=key or uuid.uuid4().hex
        )
        return started


NDJSON = "application/x-ndjson"
_LOOPBACK = re.compile(r"^https?://(127\.0\.0\.1|localhost|\[::1\])(:\d+)?$")


def demo_token_path() -> Path:
    """Where `evalbook serve` on the embedded database keeps the demo project's token."""
    return Path(os.environ.get("EVALBOOK_DATA_DIR") or ".evalbook") / "demo-token"


def demo_token(base_url: str) -> str | None:
    """The demo token, for a service on this machine only (never sent elsewhere)."""
    if _LOOPBACK.match(base_url) is None:
        return None
    try:
        token = demo_token_path().read_text().strip()
    except OSError:
        return None
    return token or None


def _problem(answer: httpx.Response) -> str:
    try:
        problem = answer.json()
    except ValueError:
        return f"HTTP {answer.status_code}"
    message = f"HTTP {answer.status_code}: {problem.get('detail') or problem.get('title')}"
    if isinstance(problem.get("index"), int):
        message += f" (item {problem['index']} of the request)"
    for error in (problem.get("errors") or [])[:3]:
        if isinstance(error, dict) and str(error.get("msg")) not in message:
            where = ".".join(str(part) for part in error.get("loc") or [])
            message += f"\n  {where}: {error.get('msg')}"
    return message
