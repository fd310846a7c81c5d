"""A V1 event stream read by a real HTTP client on a served runtime, every frame checked
against OpenCode's schemas as it arrives."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import httpx
import trio

from tests.gateway.conftest import assert_valid, component


class V1Stream:
    """The payloads of one ``GET /event`` (or ``/global/event``) stream so far."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.payloads: list[dict[str, Any]] = []
        self._schema = component("GlobalEvent" if path == "/global/event" else "Event")
        self._changed = trio.Event()

    def _add(self, frame: dict[str, Any]) -> None:
        payload = frame.get("payload", frame)
        if payload["type"] == "server.heartbeat":
            return  # OpenCode sends it too, but it is not in its document
        assert_valid(frame, self._schema)
        self.payloads.append(payload)
        self._changed.set()
        self._changed = trio.Event()

    async def until(
        self, test: Callable[[dict[str, Any]], bool], *, within: float = 10
    ) -> dict[str, Any]:
        """The first payload so far, or to come, that passes *test*."""
        with trio.fail_after(within):
            while True:
                for payload in self.payloads:
                    if test(payload):
                        return payload
                await self._changed.wait()

    def of(self, kind: str, session_id: str | None = None) -> list[dict[str, Any]]:
        """The payloads of type *kind* (of session *session_id*, when given)."""
        return [
            p for p in self.payloads
            if p["type"] == kind
            and (session_id is None or _session_of(p["properties"]) == session_id)
        ]  # fmt: skip

    def parts(self, session_id: str) -> dict[str, dict[str, Any]]:
        """The last announced state of each part of *session_id*, by part id."""
        return {
            p["properties"]["part"]["id"]: p["properties"]["part"]
            for p in self.of("message.part.updated", session_id)
        }


def _session_of(properties: dict[str, Any]) -> str | None:
    sid = properties.get("sessionID")
    if sid is None and isinstance(properties.get("part"), dict):
        sid = properties["part"].get("sessionID")
    return sid if isinstance(sid, str) else None


@asynccontextmanager
async def v1_stream(url: str, path: str = "/event") -> AsyncIterator[V1Stream]:
    """Read *path* of *url* until the block ends; yields once ``server.connected`` came."""
    stream = V1Stream(path)
    # the reader ends (cancelled) before its client closes: a reader that had data waiting
    # would otherwise read from the closed socket and fail the block
    async with httpx.AsyncClient(base_url=url) as client, trio.open_nursery() as nursery:

        async def read(task_status: Any) -> None:
            timeout = httpx.Timeout(5, read=None)
            async with client.stream("GET", path, timeout=timeout) as response:
                assert response.status_code == 200
                task_status.started()
                async for line in response.aiter_lines():
                    if line.startswith("data: "):
                        stream._add(json.loads(line[6:]))

        await nursery.start(read)
        await stream.until(lambda p: p["type"] == "server.connected")
        try:
            yield stream
        finally:
            nursery.cancel_scope.cancel()
