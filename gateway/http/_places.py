"""Which Location a request names: OpenCode's ``x-opencode-directory`` header or
``?directory=``, shared by the rooms on the core."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import unquote

from quart import request

from gateway.http._wire import GatewayError

if TYPE_CHECKING:
    from gateway.http._app import Gateway

__all__ = ["named_directory", "request_directory"]


def request_directory(gw: Gateway) -> Path:
    """The directory a request names (header, then query), else the server's.

    Raises 400 ``InvalidRequestError`` when it is not an existing directory.
    """
    raw = request.headers.get("x-opencode-directory") or request.args.get("directory")
    if not raw:
        return gw.directory.resolve()
    if "\x00" in unquote(raw):  # no path holds one (resolving it raises ValueError)
        raise GatewayError("InvalidRequestError", f"Not a directory: {raw!r}")
    path = Path(unquote(raw)).expanduser()
    if not path.is_absolute():
        path = gw.directory / path
    path = path.resolve()
    if not path.is_dir():
        raise GatewayError("InvalidRequestError", f"Not a directory: {raw}")
    return path


def named_directory(gw: Gateway) -> Path:
    """The directory a request names: V2's ``location[directory]``, else as
    ``request_directory``. Raises 400 ``InvalidRequestError`` when it is not an existing
    directory."""
    raw = request.args.get("location[directory]")
    if not raw:
        return request_directory(gw)
    directory = Path(raw)
    if "\x00" in raw or not directory.is_dir():
        raise GatewayError("InvalidRequestError", f"Not a directory: {raw}")
    return directory.resolve()
