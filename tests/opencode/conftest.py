"""One mock provider and one ``kittiwake serve`` per module (the clients start slowly)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.gateway.conftest import assert_valid, component

from .harness import Kittiwake, Provider, require_clients


@pytest.fixture(scope="module")
def provider() -> Iterator[Provider]:
    require_clients()
    mock = Provider().start()
    yield mock
    mock.stop()


@pytest.fixture(scope="module")
def kittiwake(provider: Provider, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kittiwake]:
    served = Kittiwake(
        tmp_path_factory.mktemp("opencode"), provider, permission={"bash": "ask"}
    ).start()
    yield served
    served.stop()


class EventLog:
    """Every frame of one V1 SSE stream but heartbeats, read on a thread; each is checked
    against OpenCode's schema (``GlobalEvent`` or ``Event``) as it arrives. Made once the
    stream's first frame (``server.connected``) arrived, so no later event is missed."""

    def __init__(self, url: str, path: str, *, connect_timeout: float = 30) -> None:
        self.frames: list[dict[str, Any]] = []
        self.invalid: list[str] = []
        self._schema = component("GlobalEvent" if path == "/global/event" else "Event")
        self._stop = threading.Event()
        self._connected = threading.Event()
        self._arrived = threading.Condition()
        self._thread = threading.Thread(target=self._read, args=(url + path,), daemon=True)
        self._thread.start()
        if not self._connected.wait(connect_timeout):
            raise TimeoutError(f"no first frame on {url + path} in {connect_timeout} s")

    def _read(self, url: str) -> None:
        try:
            with httpx.stream("GET", url, timeout=httpx.Timeout(5, read=None)) as response:
                for line in response.iter_lines():
                    if self._stop.is_set():
                        return
                    if line.startswith("data: "):
                        frame = json.loads(line[6:])
                        self._connected.set()
                        if frame.get("payload", frame)["type"] == "server.heartbeat":
                            continue  # sent by OpenCode too, but not in its document
                        try:
                            assert_valid(frame, self._schema)
                        except Exception as exc:  # noqa: BLE001 - reported by the test
                            self.invalid.append(f"{frame}: {str(exc)[:300]}")
                        with self._arrived:
                            self.frames.append(frame)
                            self._arrived.notify_all()
        except httpx.HTTPError:
            return

    def payloads(self) -> list[dict[str, Any]]:
        return [f.get("payload", f) for f in self.frames]

    def wait_until(
        self, predicate: Callable[[list[dict[str, Any]]], bool], timeout: float = 10
    ) -> bool:
        """Whether *predicate* of the payloads held within *timeout* seconds, looked at
        after each frame (the stream is read on its own thread)."""
        with self._arrived:
            return self._arrived.wait_for(lambda: predicate(self.payloads()), timeout)

    def close(self) -> None:
        self._stop.set()


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path
