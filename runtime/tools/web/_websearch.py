"""The ``websearch`` tool: ranked results from the search backend the configuration names.

Each backend is spoken in its own wire format (request building and answer parsing are
pure functions, tested against local servers):

- ``exa``: ``POST https://api.exa.ai/search`` with ``x-api-key``; ``{"query",
  "numResults", "contents": {"text": {"maxCharacters"}}}`` → ``results[]`` of ``title``,
  ``url``, ``text``.
- ``brave``: ``GET https://api.search.brave.com/res/v1/web/search?q=&count=`` with
  ``X-Subscription-Token`` → ``web.results[]`` of ``title``, ``url``, ``description``.
- ``tavily``: ``POST https://api.tavily.com/search`` with ``Authorization: Bearer``;
  ``{"query", "max_results"}`` → ``results[]`` of ``title``, ``url``, ``content``.
- ``searxng``: ``GET <url>/search?q=&format=json`` (the instance's JSON format must be
  enabled) → ``results[]`` of ``title``, ``url``, ``content``.

The URL is the configured one (the backend's public endpoint by default), never one the
model chooses, so no address policy applies.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Final, Literal, TypeAlias

import msgspec
import trio

from runtime.llm import TextPart
from runtime.tools._model import ToolContext, ToolEnvironment, ToolError, ToolOutput
from runtime.tools._tool import Tool
from runtime.tools.web._webfetch import read_bounded

__all__ = [
    "SearchBackend",
    "SearchRequest",
    "SearchResult",
    "WebSearchInput",
    "WebSearchSettings",
    "parse_search_answer",
    "search_request",
    "websearch_tool",
]

SearchBackend: TypeAlias = Literal["exa", "brave", "tavily", "searxng"]
ENDPOINTS: Final[dict[str, str]] = {
    "exa": "https://api.exa.ai/search",
    "brave": "https://api.search.brave.com/res/v1/web/search",
    "tavily": "https://api.tavily.com/search",
}
_SNIPPET_CHARS: Final = 1000


class WebSearchInput(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """Input of ``websearch``: the query and how many results to return (``numResults``)."""

    query: Annotated[str, msgspec.Meta(min_length=1, max_length=2000)]
    num_results: Annotated[int, msgspec.Meta(ge=1, le=20)] = 8


class WebSearchSettings(msgspec.Struct, frozen=True, kw_only=True):
    """The configured backend (config ``websearch``): which one, its endpoint (required
    for ``searxng``), its key, the most results a call may ask for and a timeout."""

    backend: SearchBackend
    url: str | None = None
    api_key: str | None = None
    max_results: int = 10
    timeout: float = 30.0
    max_response_bytes: int = 2 * 1024 * 1024


class SearchRequest(msgspec.Struct, frozen=True, kw_only=True):
    """One HTTP request to a backend."""

    method: Literal["GET", "POST"]
    url: str
    headers: dict[str, str]
    params: dict[str, str] = {}
    json: Any = None


class SearchResult(msgspec.Struct, frozen=True, kw_only=True):
    """One ranked result."""

    title: str
    url: str
    snippet: str = ""


DESCRIPTION: Final = (
    "Search the web. Returns ranked results (title, URL and a snippet); fetch a result with "
    "webfetch to read it. numResults is how many to return."
)


def search_request(settings: WebSearchSettings, query: str, count: int) -> SearchRequest:
    """The request asking *settings*' backend for *count* results of *query*.

    Raises ``ToolError`` when the backend lacks its key or (SearXNG) its URL.
    """
    backend = settings.backend
    if backend == "searxng":
        if not settings.url:
            raise ToolError("websearch: the searxng backend needs websearch.url")
        url = settings.url.rstrip("/")
        url = url if url.endswith("/search") else f"{url}/search"
        return SearchRequest(
            method="GET", url=url, headers={"Accept": "application/json"},
            params={"q": query, "format": "json"},
        )  # fmt: skip
    if not settings.api_key:
        raise ToolError(f"websearch: the {backend} backend needs websearch.apiKey")
    url = settings.url or ENDPOINTS[backend]
    key = settings.api_key
    if backend == "exa":
        body = {"query": query, "numResults": count,
                "contents": {"text": {"maxCharacters": _SNIPPET_CHARS}}}  # fmt: skip
        return SearchRequest(method="POST", url=url, headers={"x-api-key": key}, json=body)
    if backend == "brave":
        return SearchRequest(
            method="GET", url=url, params={"q": query, "count": str(count)},
            headers={"Accept": "application/json", "X-Subscription-Token": key},
        )  # fmt: skip
    return SearchRequest(
        method="POST", url=url, headers={"Authorization": f"Bearer {key}"},
        json={"query": query, "max_results": count},
    )  # fmt: skip


def parse_search_answer(backend: SearchBackend, answer: Any, count: int) -> list[SearchResult]:
    """The first *count* results of a backend's JSON answer, in its ranking order.

    Raises ``ToolError`` when the answer does not have the backend's shape.
    """
    try:
        if backend == "brave":
            items = (answer.get("web") or {}).get("results") or []
        else:
            items = answer.get("results") or []
        snippet_key = {"exa": "text", "brave": "description"}.get(backend, "content")
        results = [
            SearchResult(
                title=str(item.get("title") or item.get("url")),
                url=str(item["url"]),
                snippet=_snippet(item.get(snippet_key) or item.get("highlights") or ""),
            )
            for item in items
            if isinstance(item, dict) and item.get("url")
        ]
    except (AttributeError, TypeError, KeyError) as exc:
        raise ToolError(f"websearch: unexpected {backend} answer: {exc}") from None
    return results[:count]


def _snippet(value: Any) -> str:
    text = " ".join(value) if isinstance(value, list) else str(value)
    text = " ".join(text.split())
    return text if len(text) <= _SNIPPET_CHARS else text[: _SNIPPET_CHARS - 3] + "..."


def websearch_tool(settings: WebSearchSettings | Callable[[], WebSearchSettings]) -> Tool[Any]:
    """The ``websearch`` tool (permission ``websearch``, resource: the query).

    *settings* may be a callable read at each call (a Location's current configuration).
    """
    current: Callable[[], WebSearchSettings] = (
        settings if callable(settings) else (lambda: settings)
    )

    async def handler(data: WebSearchInput, ctx: ToolContext, env: ToolEnvironment) -> ToolOutput:
        config = current()
        count = min(data.num_results, config.max_results)
        request = search_request(config, data.query, count)
        try:
            with trio.fail_after(config.timeout):
                answer = await _send(request, config)
        except trio.TooSlowError:
            raise ToolError(f"websearch timed out after {config.timeout:g} s") from None
        results = parse_search_answer(config.backend, answer, count)
        return _output(data.query, results)

    return Tool(
        name="websearch",
        description=DESCRIPTION,
        input_type=WebSearchInput,
        handler=handler,
        permission="websearch",
        resources=lambda data, env: [data.query],
    )


async def _send(request: SearchRequest, settings: WebSearchSettings) -> Any:
    import httpx  # deferred: serving without web calls never imports it

    async with httpx.AsyncClient(trust_env=True, follow_redirects=False) as client:
        try:
            async with client.stream(
                request.method, request.url, headers=request.headers,
                params=request.params or None, json=request.json,
            ) as response:  # fmt: skip
                body = await read_bounded(response, settings.max_response_bytes)
                if body is None:
                    raise ToolError("websearch: the backend's answer is too large")
        except httpx.HTTPError as exc:
            raise ToolError(f"websearch: {settings.backend} request failed: {exc}") from None
    if response.status_code >= 400:
        message = body[:300].decode("utf-8", errors="replace")
        raise ToolError(f"websearch: {settings.backend} answered {response.status_code}: {message}")
    try:
        return msgspec.json.decode(body)
    except msgspec.DecodeError:
        raise ToolError(f"websearch: {settings.backend} answered with invalid JSON") from None


def _output(query: str, results: list[SearchResult]) -> ToolOutput:
    if not results:
        text = f"No results for {query!r}."
    else:
        blocks = [
            f"{i}. {r.title}\n   {r.url}" + (f"\n   {r.snippet}" if r.snippet else "")
            for i, r in enumerate(results, 1)
        ]
        text = "\n\n".join(blocks)
    structured = {"query": query, "results": msgspec.to_builtins(results)}
    return ToolOutput(content=[TextPart(text=text)], structured=structured)
