"""Prometheus metrics: one registry per app, and an ASGI middleware that times requests."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from starlette.types import ASGIApp, Message, Receive, Scope, Send


class Metrics:
    """The app's collectors, on a registry of its own (several apps may share a process)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "evalbook_http_requests_total",
            "HTTP requests by method, route and status.",
            ["method", "route", "status"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "evalbook_http_request_seconds",
            "HTTP request latency by method and route.",
            ["method", "route"],
            registry=self.registry,
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
        )
        self.open_incidents = Gauge(
            "evalbook_open_incidents",
            "Reports whose stored bytes no longer verify (open incidents).",
            registry=self.registry,
        )
        self.reports_issued = Counter(
            "evalbook_reports_issued_total", "Reports issued.", registry=self.registry
        )
        self.cases_accepted = Counter(
            "evalbook_cases_accepted_total", "Cases stored by ingestion.", registry=self.registry
        )
        self._labelled: dict[tuple[str, str, int], tuple[Any, Any]] = {}

    def children(self, method: str, template: str, status: int) -> tuple[Any, Any]:
        """The request counter and latency histogram of a (method, route, status), looked up
        once."""
        key = (method, template, status)
        children = self._labelled.get(key)
        if children is None:
            children = (
                self.requests.labels(method, template, str(status)),
                self.latency.labels(method, template),
            )
            self._labelled[key] = children
        return children


class MetricsMiddleware:
    """Counts and times every HTTP request by its route template, in the collectors of the
    running application's state (`metrics_of` finds them)."""

    def __init__(self, app: ASGIApp, metrics_of: Callable[[Scope], Metrics | None]) -> None:
        self.app = app
        self.metrics_of = metrics_of

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        metrics = self.metrics_of(scope) if scope["type"] == "http" else None
        if metrics is None:
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status_holder: dict[str, Any] = {"status": 500}

        async def send_wrapper(message: Message) -> None:
            if message["type"] == "http.response.start":
                status_holder["status"] = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_wrapper)
        finally:
            route = scope.get("route")
            template = getattr(route, "path", None) or "unmatched"
            method = scope.get("method", "")
            counter, histogram = metrics.children(method, template, status_holder["status"])
            counter.inc()
            histogram.observe(time.perf_counter() - started)
