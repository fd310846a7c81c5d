"""The ``webfetch`` tool: one URL fetched over HTTP(S), returned as Markdown, text or HTML.

Each hop (the URL, then every redirect) is resolved here, every address it resolves to
is checked against the :class:`AddressPolicy`, and the request connects to the checked
address (the host name still goes in ``Host`` and in TLS SNI and certificate checks), so
a DNS answer that changes between check and connection cannot reach a refused address.
Redirects are followed by hand up to ``max_redirects``; the body is streamed and cut
off past ``max_bytes`` (decoded size, so a compressed bomb is caught); only textual
content types are accepted. HTML becomes Markdown, or plain text, through
``html-to-markdown`` (a Rust converter), in a worker thread.
"""

from __future__ import annotations

import re
import socket
import ssl
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Annotated, Final, Literal

import msgspec
import trio

from runtime.llm import TextPart
from runtime.tools._io import run_blocking
from runtime.tools._model import ToolContext, ToolEnvironment, ToolError, ToolOutput
from runtime.tools._tool import Tool
from runtime.tools.web._addresses import AddressPolicy, refusal

if TYPE_CHECKING:
    import httpx

__all__ = [
    "WebFetchInput",
    "WebFetchLimits",
    "html_to_markdown",
    "html_to_text",
    "read_bounded",
    "webfetch_tool",
]

_TEXTUAL: Final = re.compile(
    r"^(text/[\w.+-]+|application/([\w.-]+\+)?(json|xml)|application/(javascript|ecmascript"
    r"|x-javascript|x-sh|x-yaml|yaml|toml|x-toml|sql|graphql|ld\+json))$"
)
_CLOSE_TIMEOUT: Final = 5.0
_CLOSE_MAX_STEPS: Final = 8
_DROPPED: Final = ["script", "style", "noscript", "iframe", "object", "embed", "template"]
_ACCEPT: Final = {
    "markdown": "text/markdown;q=1.0, text/html;q=0.9, text/plain;q=0.8, */*;q=0.1",
    "text": "text/plain;q=1.0, text/html;q=0.9, text/markdown;q=0.8, */*;q=0.1",
    "html": "text/html;q=1.0, application/xhtml+xml;q=0.9, text/plain;q=0.8, */*;q=0.1",
}


class WebFetchInput(msgspec.Struct, frozen=True, kw_only=True):
    """Input of ``webfetch``: an http(s) URL, the format to return, a timeout in seconds."""

    url: str
    format: Literal["markdown", "text", "html"] = "markdown"
    timeout: Annotated[float, msgspec.Meta(gt=0)] | None = None


class WebFetchLimits(msgspec.Struct, frozen=True, kw_only=True):
    """Bounds and address policy of ``webfetch`` (config ``webfetch``).

    ``timeout`` is the default for a call that names none; a call's own timeout is
    capped at ``max_timeout``. Both cover the whole fetch, redirects included.
    """

    max_bytes: int = 5 * 1024 * 1024
    max_redirects: int = 5
    timeout: float = 30.0
    max_timeout: float = 120.0
    policy: AddressPolicy = AddressPolicy()
    user_agent: str = "Kittiwake-webfetch/0.1"


DESCRIPTION: Final = (
    "Fetch a web page by http(s) URL and return its content as markdown (default), text or "
    "html. timeout is in seconds (at most 120). Local and private network addresses are "
    "refused unless configured; large pages are truncated."
)


class _Fetched(msgspec.Struct, frozen=True, kw_only=True):
    url: str
    status: int
    content_type: str
    body: bytes
    encoding: str


def webfetch_tool(
    limits: WebFetchLimits | Callable[[], WebFetchLimits] | None = None,
) -> Tool[WebFetchInput]:
    """The ``webfetch`` tool (permission ``webfetch``, resource: the URL as given).

    *limits* may be a callable read at each call (a Location's current configuration).
    """
    current: Callable[[], WebFetchLimits]
    if callable(limits):
        current = limits
    else:
        fixed = limits or WebFetchLimits()
        current = lambda: fixed  # noqa: E731
    made: list[ssl.SSLContext] = []  # made at the first call: loading CAs takes a while

    async def handler(data: WebFetchInput, ctx: ToolContext, env: ToolEnvironment) -> ToolOutput:
        if not made:
            made.append(ssl.create_default_context())
        tls = made[0]
        bounds = current()
        timeout = min(data.timeout or bounds.timeout, bounds.max_timeout)
        try:
            with trio.fail_after(timeout):
                fetched = await fetch(data.url, data.format, bounds, tls)
        except trio.TooSlowError:
            raise ToolError(f"Fetching {data.url} timed out after {timeout:g} s") from None
        return await run_blocking(env, lambda: _output(fetched, data.format))

    return Tool(
        name="webfetch",
        description=DESCRIPTION,
        input_type=WebFetchInput,
        handler=handler,
        permission="webfetch",
        resources=lambda data, env: [data.url],
    )


async def fetch(url: str, fmt: str, limits: WebFetchLimits, tls: ssl.SSLContext) -> _Fetched:
    """Fetch *url*, following at most ``limits.max_redirects`` redirects.

    Raises ``ToolError`` for a refused address, a bad URL, too many redirects, an
    error status, a body over ``max_bytes`` or a non-textual content type. Cancellation
    closes the connection.
    """
    import httpx  # deferred: serving without web calls never imports it

    current = _parse(url)
    async with httpx.AsyncClient(verify=tls, trust_env=False, follow_redirects=False) as client:
        for _ in range(limits.max_redirects + 1):
            address = await checked_address(current, limits.policy)
            target = current.copy_with(host=address)
            headers = {
                "Host": current.netloc.decode("ascii"),
                "Accept": _ACCEPT.get(fmt, "*/*"),
                "User-Agent": limits.user_agent,
            }
            request = client.build_request(
                "GET", target, headers=headers, extensions={"sni_hostname": current.host}
            )
            try:
                response = await client.send(request, stream=True)
            except httpx.HTTPError as exc:
                raise ToolError(f"Fetching {current} failed: {exc or type(exc).__name__}") from None
            try:
                if response.is_redirect:
                    current = _next_hop(current, response)
                    continue
                return await _read(current, response, limits)
            finally:
                await response.aclose()
    raise ToolError(f"Too many redirects fetching {url} (more than {limits.max_redirects})")


def _parse(url: str) -> httpx.URL:
    import httpx

    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL as exc:
        raise ToolError(f"Invalid URL {url!r}: {exc}") from None
    if parsed.scheme not in ("http", "https") or not parsed.host:
        raise ToolError(f"Invalid URL {url!r}: only http:// and https:// URLs can be fetched")
    return parsed


def _next_hop(current: httpx.URL, response: httpx.Response) -> httpx.URL:
    location = response.headers.get("location")
    if not location:
        raise ToolError(f"Redirect from {current} without a Location header")
    return _parse(str(current.join(location)))


async def checked_address(url: httpx.URL, policy: AddressPolicy) -> str:
    """Resolve *url*'s host and return the first address, when *policy* allows every one.

    Raises ``ToolError`` naming the refused address, or when the name does not resolve.
    """
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        infos = await trio.socket.getaddrinfo(url.host, port, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise ToolError(f"Cannot resolve {url.host}: {exc.strerror or exc}") from None
    addresses = list(dict.fromkeys(str(info[4][0]) for info in infos))
    if not addresses:
        raise ToolError(f"Cannot resolve {url.host}: no address")
    for address in addresses:
        reason = refusal(address, policy)
        if reason is not None:
            raise ToolError(f"Refused to fetch {url}: {url.host} resolves to {address}, {reason}")
    return addresses[0]


async def _read(url: httpx.URL, response: httpx.Response, limits: WebFetchLimits) -> _Fetched:
    if response.status_code >= 400:
        raise ToolError(f"Fetching {url} failed with status {response.status_code}")
    media = response.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if media and not _TEXTUAL.match(media):
        raise ToolError(f"Cannot fetch {url}: unsupported content type {media}")
    declared = response.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limits.max_bytes:
        raise ToolError(_too_large(url, limits))
    body = await read_bounded(response, limits.max_bytes)
    if body is None:
        raise ToolError(_too_large(url, limits))
    return _Fetched(
        url=str(url), status=response.status_code, content_type=media or "text/plain",
        body=body, encoding=response.charset_encoding or "utf-8",
    )  # fmt: skip


async def read_bounded(response: httpx.Response, limit: int) -> bytes | None:
    """The decoded body of *response*, or ``None`` once it grows past *limit* bytes.

    On going past the limit, on an error and on cancellation the connection is closed
    and httpx's suspended body iterators are run to their end (shielded, bounded), so
    none is left for the garbage collector to finalise.
    """
    body = bytearray()
    chunks = response.aiter_bytes()
    try:
        while (chunk := await anext(chunks, None)) is not None:
            body += chunk
            if len(body) > limit:
                await _close_unfinished(response, chunks)
                return None
    except BaseException:
        await _close_unfinished(response, chunks)
        raise
    return bytes(body)


async def _close_unfinished(response: httpx.Response, chunks: AsyncIterator[bytes]) -> None:
    with trio.CancelScope(shield=True), trio.move_on_after(_CLOSE_TIMEOUT):
        await response.aclose()
        for _ in range(_CLOSE_MAX_STEPS):
            try:
                await anext(chunks)
            except (StopAsyncIteration, Exception):
                return


def _too_large(url: httpx.URL, limits: WebFetchLimits) -> str:
    return f"Response from {url} is too large (over {limits.max_bytes} bytes)"


def html_to_markdown(html: str) -> str:
    """Markdown of an HTML document (ATX headings, ``-`` bullets, inline links; scripts,
    styles, embeds and hidden content dropped; no metadata front matter)."""
    return _convert(html, "markdown")


def html_to_text(html: str) -> str:
    """The visible text of an HTML document, blocks separated by blank lines."""
    return _convert(html, "plain")


def _convert(html: str, output: str) -> str:
    from html_to_markdown import ConversionOptions, convert  # deferred, as httpx

    options = ConversionOptions(
        heading_style="atx", bullets="-", extract_metadata=False, output_format=output,
        exclude_selectors=list(_DROPPED),
    )  # fmt: skip
    text = convert(html, options).content or ""
    return re.sub(r"\n{3,}", "\n\n", text).strip() + "\n"


def _output(fetched: _Fetched, fmt: str) -> ToolOutput:
    try:
        text = fetched.body.decode(fetched.encoding, errors="replace")
    except LookupError:  # an unknown charset name
        text = fetched.body.decode("utf-8", errors="replace")
    is_html = fetched.content_type in ("text/html", "application/xhtml+xml")
    if is_html and fmt == "markdown":
        text = html_to_markdown(text)
    elif is_html and fmt == "text":
        text = html_to_text(text)
    structured = {
        "url": fetched.url, "status": fetched.status, "content_type": fetched.content_type,
        "bytes": len(fetched.body), "format": fmt,
    }  # fmt: skip
    return ToolOutput(content=[TextPart(text=text)], structured=structured)
