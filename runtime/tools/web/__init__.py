"""The web tools: ``webfetch`` (a model-chosen URL, reached only at addresses the
:class:`AddressPolicy` allows) and ``websearch`` (the configured search backend)."""

from runtime.tools.web._addresses import AddressPolicy as AddressPolicy
from runtime.tools.web._addresses import address_kind as address_kind
from runtime.tools.web._webfetch import WebFetchInput as WebFetchInput
from runtime.tools.web._webfetch import WebFetchLimits as WebFetchLimits
from runtime.tools.web._webfetch import html_to_markdown as html_to_markdown
from runtime.tools.web._webfetch import html_to_text as html_to_text
from runtime.tools.web._webfetch import webfetch_tool as webfetch_tool
from runtime.tools.web._websearch import SearchResult as SearchResult
from runtime.tools.web._websearch import WebSearchInput as WebSearchInput
from runtime.tools.web._websearch import WebSearchSettings as WebSearchSettings
from runtime.tools.web._websearch import parse_search_answer as parse_search_answer
from runtime.tools.web._websearch import search_request as search_request
from runtime.tools.web._websearch import websearch_tool as websearch_tool

__all__ = [
    "AddressPolicy",
    "SearchResult",
    "WebFetchInput",
    "WebFetchLimits",
    "WebSearchInput",
    "WebSearchSettings",
    "address_kind",
    "html_to_markdown",
    "html_to_text",
    "parse_search_answer",
    "search_request",
    "webfetch_tool",
    "websearch_tool",
]
