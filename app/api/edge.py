"""What every HTTP exchange gets at the edge of the app, below routing: `nosniff` on every
response, and a request body that must keep arriving (an idle body is answered 408)."""

from __future__ import annotations

import asyncio

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.domain.errors import RequestTimeout

NOSNIFF = (b"x-content-type-options", b"nosniff")


class EdgeMiddleware:
    """Adds `X-Content-Type-Options: nosniff` to every response (problem documents and the
    fast lane's answers included), and refuses a request body from which nothing arrived for
    `body_idle_seconds`: whoever stalls an upload holds a transaction no longer than that."""

    def __init__(self, app: ASGIApp, body_idle_seconds: float) -> None:
        self.app = app
        self.body_idle_seconds = body_idle_seconds

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        idle = self.body_idle_seconds
        body_done = False

        async def receive_in_time() -> Message:
            nonlocal body_done
            if body_done:
                # After the body only a disconnect can come; waiting for it has no deadline.
                return await receive()
            try:
                async with asyncio.timeout(idle):
                    message = await receive()
            except TimeoutError:
                raise RequestTimeout(
                    f"no part of the request body arrived for {idle:g} s; send the body "
                    "without pauses (cases in batches as they are scored)"
                ) from None
            if message["type"] != "http.request" or not message.get("more_body", False):
                body_done = True
            return message

        async def send_with_nosniff(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", ()), NOSNIFF]
            await send(message)

        await self.app(scope, receive_in_time, send_with_nosniff)
