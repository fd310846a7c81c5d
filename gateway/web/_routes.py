"""The web app's routes: ``GET /`` (the page) and ``GET /web/{name}`` (its static files).

The files are package data (``gateway/web/static``, shipped in the wheel), read once when the
room is installed. Every answer carries the same strict Content-Security-Policy: scripts,
styles, images, the manifest and connections from this origin only, no inline script or
style, no ``eval``, no plugins, no framing. The guard of the core covers these routes like
every other on a server without bearer tokens (the browser asks for the password); on a
token server the page and its files, which hold no data, are open, so that the page can
show its sign-in form (``POST /api/signin``) to a browser not signed in yet.
"""

from __future__ import annotations

import functools
import hashlib
from importlib import resources
from typing import Final

import msgspec
from quart import Response, request
from quart_trio import QuartTrio

from gateway.http import HTML, Answer, Gateway, GatewayError, Room, RouteTable, shared_session

__all__ = ["CONTENT_SECURITY_POLICY", "WebAssets", "open_in_browser", "web_routes"]

CONTENT_SECURITY_POLICY: Final = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; manifest-src 'self'; font-src 'self'; base-uri 'none'; "
    "form-action 'self'; frame-ancestors 'none'; object-src 'none'"
)
"""The policy of every web answer: only this origin's files run or load, and nothing inline."""

_TYPES: Final = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
    ".png": "image/png",
    ".webmanifest": "application/manifest+json",
    ".txt": "text/plain; charset=utf-8",
}
_INDEX: Final = "index.html"
_SHARE: Final = "share.html"
_SHARED: Final = "/s/{sessionID}/{secret}"
_ASSET: Final = Answer(type=str, media="text/javascript", description="A static file of the page")


class WebAsset(msgspec.Struct, frozen=True):
    """One static file: its bytes, media type and entity tag (a hash of the bytes)."""

    body: bytes
    content_type: str
    etag: str


class WebAssets(msgspec.Struct, frozen=True):
    """The page's static files by name, read from the package once."""

    files: dict[str, WebAsset]

    @classmethod
    def load(cls) -> WebAssets:
        """Every file of ``gateway/web/static`` whose suffix has a media type, read once per
        process (each app served shares them).

        Raises OSError when the package data cannot be read (an incomplete install).
        """
        return _package_assets()

    @classmethod
    def read(cls) -> WebAssets:
        """Read the package's files now (``load`` keeps the first reading)."""
        files: dict[str, WebAsset] = {}
        for entry in resources.files("gateway.web").joinpath("static").iterdir():
            suffix = "." + entry.name.rsplit(".", 1)[-1] if "." in entry.name else ""
            if not entry.is_file() or suffix not in _TYPES:
                continue
            body = entry.read_bytes()
            etag = '"' + hashlib.sha256(body).hexdigest()[:32] + '"'
            files[entry.name] = WebAsset(body=body, content_type=_TYPES[suffix], etag=etag)
        return cls(files=files)

    def answer(self, name: str, if_none_match: str | None) -> Response:
        """The file *name* (304 when *if_none_match* is its tag); GatewayError 404 otherwise."""
        asset = self.files.get(name)
        if asset is None:
            raise GatewayError("NotFoundError", f"No such file of the web app: {name}")
        headers = _headers(asset.etag)
        if if_none_match == asset.etag:
            return Response(b"", status=304, headers=headers)
        return Response(asset.body, status=200, content_type=asset.content_type, headers=headers)


@functools.cache
def _package_assets() -> WebAssets:
    return WebAssets.read()


def _headers(etag: str) -> dict[str, str]:
    return {
        "Content-Security-Policy": CONTENT_SECURITY_POLICY,
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "no-referrer",
        "Cache-Control": "no-cache",
        "ETag": etag,
    }


def web_routes(gw: Gateway, assets: WebAssets | None = None) -> Room:
    """The web app's room: installs ``GET /`` and ``GET /web/{name}`` on the core's table,
    and, open without the password, a shared session's page ``GET /s/{sessionID}/{secret}/``
    and its files (404 unless the secret opens the session: ``shared_session``).

    *assets* defaults to the package's files, read here (OSError if they cannot be).
    """
    files = assets or WebAssets.load()
    for page in (_INDEX, _SHARE):
        if page not in files.files:
            raise OSError(f"the web app's {page} is missing from gateway/web/static")

    open_page = gw.access.tokens

    def install(table: RouteTable, app: QuartTrio) -> None:
        @table.get("/", "kittiwake.web.page", "The web app", answer=HTML, public=open_page)
        async def page() -> Response:
            return files.answer(_INDEX, request.headers.get("If-None-Match"))

        @table.get(
            "/web/{name}", "kittiwake.web.file", "A static file of the web app", answer=_ASSET,
            errors=("NotFoundError",), public=open_page,
        )  # fmt: skip
        async def asset(name: str) -> Response:
            return files.answer(name, request.headers.get("If-None-Match"))

        @table.get(
            _SHARED + "/", "kittiwake.web.shared", "A shared session, read-only (no password)",
            answer=HTML, errors=("NotFoundError",), public=True,
        )  # fmt: skip
        async def shared_page(session_id: str, secret: str) -> Response:
            await shared_session(gw, session_id, secret)
            return files.answer(_SHARE, request.headers.get("If-None-Match"))

        @table.get(
            _SHARED + "/web/{name}", "kittiwake.web.shared.file",
            "A static file of the web app, under a shared link", answer=_ASSET,
            errors=("NotFoundError",), public=True,
        )  # fmt: skip
        async def shared_asset(session_id: str, secret: str, name: str) -> Response:
            await shared_session(gw, session_id, secret)
            return files.answer(name, request.headers.get("If-None-Match"))

    return install


def open_in_browser(url: str) -> bool:
    """Ask the desktop's browser to open *url* (``webbrowser.open``, which honours
    ``$BROWSER``); whether one was found. Blocks while the browser command starts: run it in
    a worker thread from async code."""
    import webbrowser  # `kittiwake web` opening its page, not every start

    return webbrowser.open(url)
