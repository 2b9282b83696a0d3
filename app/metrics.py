"""Prometheus metrics: one registry per app, and an ASGI middleware that times requests."""

from __future__ import annotations

import time
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


class MetricsMiddleware:
    """Counts and times every HTTP request by its route template."""

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics
        self._labelled: dict[tuple[str, str, int], tuple[Any, Any]] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
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
            counter, histogram = self._children(method, template, status_holder["status"])
            counter.inc()
            histogram.observe(time.perf_counter() - started)

    def _children(self, method: str, template: str, status: int) -> tuple[Any, Any]:
        """The labelled metrics of a (method, route, status), looked up once."""
        key = (method, template, status)
        children = self._labelled.get(key)
        if children is None:
            children = (
                self.metrics.requests.labels(method, template, str(status)),
                self.metrics.latency.labels(method, template),
            )
            self._labelled[key] = children
        return children
