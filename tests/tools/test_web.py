"""webfetch and websearch against real HTTP servers on 127.0.0.1."""

from __future__ import annotations

import json
import os
from pathlib import Path

import msgspec
import pytest

from actors import Configuration
from runtime import Location, open_runtime
from runtime.agents import BUILD, AgentInfo, PermissionRule
from runtime.llm import ScriptedLLM, TextPart
from runtime.tools import (
    AddressPolicy,
    ToolContext,
    ToolEnvironment,
    ToolFailure,
    ToolOutputLimits,
    ToolRegistry,
    ToolSuccess,
    WebFetchLimits,
    WebSearchSettings,
    address_kind,
    webfetch_tool,
    websearch_tool,
)
from tests.execution.conftest import answer, prompt
from tests.tools.web_server import Page, Seen, web_server

LOOPBACK = WebFetchLimits(policy=AddressPolicy(allow_loopback=True))
ARTICLE = b"""<html><head><title>Kittiwakes</title><style>p{color:red}</style>
<script>alert('x')</script></head><body>
<h1>Black-legged kittiwake</h1>
<p>A <b>gull</b> of the <a href="/north">North Atlantic</a>.</p>
<ul><li>nests on cliffs</li><li>eats fish</li></ul>
</body></html>"""


def _ctx(tmp_path: Path) -> ToolContext:
    return ToolContext(
        session_id="ses_1", agent="build", assistant_message_id="msg_1", tool_call_id="call_1",
        directory=str(tmp_path),
    )  # fmt: skip


def _registry(tmp_path: Path, *tools, limits: ToolOutputLimits | None = None) -> ToolRegistry:
    env = ToolEnvironment(
        directory=str(tmp_path), data_dir=str(tmp_path / "data"),
        limits=limits or ToolOutputLimits(),
    )  # fmt: skip
    registry = ToolRegistry(env)
    registry.contribute(list(tools))
    return registry


async def _fetch(tmp_path, args, limits=LOOPBACK, agent: AgentInfo = BUILD, output=None):
    registry = _registry(tmp_path, webfetch_tool(limits), limits=output)
    return await registry.settle("webfetch", args, _ctx(tmp_path), agent=agent)


def _saved(path: str) -> str:
    return Path(path).read_text()


def _text(result) -> str:
    assert isinstance(result, ToolSuccess), result
    return "".join(p.text for p in result.content if isinstance(p, TextPart))


async def test_a_local_page_comes_back_as_markdown(tmp_path):
    async with web_server() as server:
        server.page("/bird", Page(body=ARTICLE))
        result = await _fetch(tmp_path, {"url": server.url("/bird")})
        text_result = await _fetch(tmp_path, {"url": server.url("/bird"), "format": "text"})
        html_result = await _fetch(tmp_path, {"url": server.url("/bird"), "format": "html"})
    markdown = _text(result)
    assert "# Black-legged kittiwake" in markdown
    assert "A **gull** of the [North Atlantic](/north)." in markdown
    assert "- nests on cliffs" in markdown
    assert "alert" not in markdown and "color:red" not in markdown
    assert result.structured["status"] == 200
    assert result.structured["content_type"] == "text/html"
    text = _text(text_result)
    assert (
        text.startswith("Black-legged kittiwake\n\nA gull of the North Atlantic.")
        and "<" not in text
    )
    assert _text(html_result) == ARTICLE.decode()
    assert server.seen[0].headers["accept"].startswith("text/markdown")


async def test_a_large_page_is_bounded_with_the_whole_text_kept(tmp_path):
    rows = b"".join(b"<p>line %d</p>\n" % i for i in range(3000))
    async with web_server() as server:
        server.page("/long", Page(body=b"<html><body>" + rows + b"</body></html>"))
        result = await _fetch(
            tmp_path, {"url": server.url("/long")},
            output=ToolOutputLimits(max_lines=100, max_bytes=4000),
        )  # fmt: skip
    text = _text(result)
    assert "line 0" in text and "line 2999" in text and "line 1500" not in text
    assert len(text.encode()) <= 4000 and "output truncated" in text
    assert "line 1500" in _saved(result.output_paths[0])


async def test_a_redirect_chain_past_the_cap_fails(tmp_path):
    async with web_server() as server:
        for i in range(4):
            server.page(f"/r{i}", Page(status=302, headers=[("location", f"/r{i + 1}")]))
        server.page("/r4", Page(body=b"arrived", content_type="text/plain"))
        capped = WebFetchLimits(policy=LOOPBACK.policy, max_redirects=3)
        failed = await _fetch(tmp_path, {"url": server.url("/r0")}, limits=capped)
        followed = await _fetch(tmp_path, {"url": server.url("/r1")}, limits=capped)
    assert isinstance(failed, ToolFailure)
    assert failed.error == f"Too many redirects fetching {server.url('/r0')} (more than 3)"
    assert _text(followed) == "arrived"


async def test_an_oversized_body_fails_declared_or_streamed(tmp_path):
    small = WebFetchLimits(policy=LOOPBACK.policy, max_bytes=100_000)
    async with web_server() as server:
        server.page("/declared", Page(body=b"x" * 100_001, content_type="text/plain"))
        server.page("/streamed", Page(body=b"y" * 300_000, content_type="text/plain", chunked=True))
        server.page("/fits", Page(body=b"z" * 100_000, content_type="text/plain", chunked=True))
        declared = await _fetch(tmp_path, {"url": server.url("/declared")}, limits=small)
        streamed = await _fetch(tmp_path, {"url": server.url("/streamed")}, limits=small)
        fits = await _fetch(tmp_path, {"url": server.url("/fits")}, limits=small)
    for result, path in ((declared, "/declared"), (streamed, "/streamed")):
        assert isinstance(result, ToolFailure)
        assert result.error == f"Response from {server.url(path)} is too large (over 100000 bytes)"
    assert fits.structured["bytes"] == 100_000


@pytest.mark.parametrize(
    "url",
    [
        "http://169.254.169.254/latest/meta-data/",
        "http://[fd00:ec2::254]/latest/meta-data/",
        "http://[::ffff:169.254.169.254]/",
        "http://2852039166/",  # 169.254.169.254 written as one number
    ],
)
async def test_a_metadata_address_is_refused_before_connecting(tmp_path, url):
    permissive = WebFetchLimits(policy=AddressPolicy(allow_loopback=True, allow_private=True))
    result = await _fetch(tmp_path, {"url": url}, limits=permissive)
    assert isinstance(result, ToolFailure)
    assert "a cloud metadata address" in result.error and result.error.startswith("Refused")


async def test_a_redirect_to_a_metadata_address_fails(tmp_path):
    target = "http://169.254.169.254/latest/meta-data/iam/"
    async with web_server() as server:
        server.page("/hop", Page(status=301, headers=[("location", target)]))
        result = await _fetch(tmp_path, {"url": server.url("/hop")})
    assert isinstance(result, ToolFailure)
    assert result.error == (
        f"Refused to fetch {target}: 169.254.169.254 resolves to 169.254.169.254,"
        " a cloud metadata address"
    )
    assert [s.target for s in server.seen] == ["/hop"]


async def test_loopback_and_private_need_configuration(tmp_path):
    async with web_server() as server:
        server.page("/", Page(body=b"home", content_type="text/plain"))
        refused = await _fetch(tmp_path, {"url": server.url("/")}, limits=WebFetchLimits())
        private = await _fetch(tmp_path, {"url": "http://10.1.2.3/"}, limits=LOOPBACK)
        assert not server.seen
    assert isinstance(refused, ToolFailure)
    assert "a loopback address (allowed only when webfetch.allow_loopback is set)" in refused.error
    assert isinstance(private, ToolFailure) and "a private address" in private.error
    assert address_kind("169.254.7.7") == "link_local"
    assert address_kind("64:ff9b::a9fe:a9fe") == "metadata"


async def test_the_checked_address_is_the_one_connected_to(tmp_path):
    """A host name is resolved once, checked, and the connection goes to that address
    with the name kept in Host (so a second DNS answer cannot be used)."""
    async with web_server() as server:
        server.page("/named", Page(body=b"by name", content_type="text/plain"))
        result = await _fetch(tmp_path, {"url": f"http://localhost:{server.port}/named"})
    assert _text(result) == "by name"
    assert server.seen[0].headers["host"] == f"localhost:{server.port}"


async def test_content_types_other_than_text_are_refused(tmp_path):
    async with web_server() as server:
        server.page("/img", Page(body=b"\x89PNG", content_type="image/png"))
        server.page("/api", Page(body=b'{"ok": true}', content_type="application/json"))
        image = await _fetch(tmp_path, {"url": server.url("/img")})
        data = await _fetch(tmp_path, {"url": server.url("/api")})
        missing = await _fetch(tmp_path, {"url": server.url("/gone")})
        scheme = await _fetch(tmp_path, {"url": "file:///etc/passwd"})
    assert isinstance(image, ToolFailure)
    assert image.error.endswith("unsupported content type image/png")
    assert _text(data) == '{"ok": true}'
    assert isinstance(missing, ToolFailure) and missing.error.endswith("failed with status 404")
    assert isinstance(scheme, ToolFailure) and "only http:// and https://" in scheme.error


async def test_a_deny_rule_blocks_a_url_pattern(tmp_path):
    rules = [
        PermissionRule(permission="*", action="allow"),
        PermissionRule(permission="webfetch", pattern="*/private/*", action="deny"),
    ]
    agent = AgentInfo(name="reader", permission=rules)
    async with web_server() as server:
        server.page("/private/x", Page(body=b"secret", content_type="text/plain"))
        server.page("/public/x", Page(body=b"open", content_type="text/plain"))
        denied = await _fetch(tmp_path, {"url": server.url("/private/x")}, agent=agent)
        allowed = await _fetch(tmp_path, {"url": server.url("/public/x")}, agent=agent)
    assert isinstance(denied, ToolFailure)
    assert denied.error == (
        f"Permission denied: agent reader may not use webfetch on {server.url('/private/x')}"
    )
    assert _text(allowed) == "open"
    assert [s.target for s in server.seen] == ["/public/x"]


# -- websearch ----------------------------------------------------------------------------


def _searxng(seen: Seen) -> Page:
    results = [
        {"title": "Kittiwake - Wikipedia", "url": "https://en.wikipedia.org/wiki/Kittiwake",
         "content": "Kittiwakes are two   closely related seabird species", "engine": "wikipedia"},
        {"title": "RSPB: Kittiwake", "url": "https://www.rspb.org.uk/kittiwake", "content": "A gull"},
        {"title": "Third", "url": "https://example.org/3", "content": "three"},
    ]  # fmt: skip
    return Page(body=json.dumps({"query": "kittiwake", "results": results}).encode(),
                content_type="application/json")  # fmt: skip


async def test_websearch_returns_ranked_results_from_searxng(tmp_path):
    async with web_server() as server:
        server.routes["/search"] = _searxng
        settings = WebSearchSettings(backend="searxng", url=server.url("/"))
        registry = _registry(tmp_path, websearch_tool(settings))
        result = await registry.settle(
            "websearch", {"query": "kittiwake", "numResults": 2}, _ctx(tmp_path), agent=BUILD
        )
    text = _text(result)
    assert text.startswith("1. Kittiwake - Wikipedia\n   https://en.wikipedia.org/wiki/Kittiwake")
    assert "Kittiwakes are two closely related seabird species" in text
    assert "2. RSPB: Kittiwake" in text and "Third" not in text
    assert [r["url"] for r in result.structured["results"]] == [
        "https://en.wikipedia.org/wiki/Kittiwake", "https://www.rspb.org.uk/kittiwake",
    ]  # fmt: skip
    assert server.seen[0].target == "/search?q=kittiwake&format=json"


async def test_websearch_speaks_brave_with_its_key(tmp_path):
    answer_body = {"type": "search", "web": {"results": [
        {"title": "Trio docs", "url": "https://trio.readthedocs.io/", "description": "async I/O"},
    ]}}  # fmt: skip
    async with web_server() as server:
        server.page("/res/v1/web/search", Page(body=json.dumps(answer_body).encode(),
                                                content_type="application/json"))  # fmt: skip
        settings = WebSearchSettings(
            backend="brave", url=server.url("/res/v1/web/search"), api_key="k-123"
        )
        registry = _registry(tmp_path, websearch_tool(settings))
        result = await registry.settle("websearch", {"query": "trio"}, _ctx(tmp_path), agent=BUILD)
        denied = await server_error(tmp_path, server)
    assert _text(result) == "1. Trio docs\n   https://trio.readthedocs.io/\n   async I/O"
    assert server.seen[0].headers["x-subscription-token"] == "k-123"
    assert server.seen[0].target == "/res/v1/web/search?q=trio&count=8"
    assert isinstance(denied, ToolFailure)
    assert denied.error.startswith("websearch: brave answered 401: ")


async def server_error(tmp_path, server):
    server.page("/unauthorized", Page(status=401, body=b'{"error": "bad key"}'))
    settings = WebSearchSettings(backend="brave", url=server.url("/unauthorized"), api_key="x")
    registry = _registry(tmp_path, websearch_tool(settings))
    return await registry.settle("websearch", {"query": "q"}, _ctx(tmp_path), agent=BUILD)


async def test_websearch_is_offered_only_with_a_configured_backend(tmp_path):
    """Through a whole drain: the provider request carries ``webfetch`` always and
    ``websearch`` only once the Location's configuration names a backend."""
    work = tmp_path / "work"
    work.mkdir()
    client = ScriptedLLM([answer("one"), answer("two")])
    configuration = Configuration(env={"HOME": str(tmp_path)})
    async with open_runtime(
        data_dir=tmp_path / "data", llm=client, configuration=configuration
    ) as rt:
        info = await rt.sessions.create(location=Location(directory=str(work)))
        await rt.sessions.prompt(info.id, prompt=prompt("first"))
        await rt.sessions.wait_idle(info.id)
        config = {"websearch": {"backend": "searxng", "url": "http://127.0.0.1:9/"}}
        (work / "kittiwake.json").write_text(json.dumps(config))
        os.utime(work, None)
        await rt.sessions.prompt(info.id, prompt=prompt("second"))
        await rt.sessions.wait_idle(info.id)
    first, second = ([t.name for t in r.tools] for r in client.requests)
    assert "webfetch" in first and "websearch" not in first
    assert "websearch" in second and "webfetch" in second


def test_configuration_keys_convert():
    from runtime.config import Config

    config = msgspec.convert(
        {"webfetch": {"allow_loopback": True, "max_bytes": 10, "timeout": 2.5},
         "websearch": {"backend": "exa", "apiKey": "k"},
         "lsp": {"py": {"command": ["pylsp"], "extensions": [".py"]}},
         "language_servers": {"idle_timeout": 60}},
        Config,
    )  # fmt: skip
    assert config.webfetch is not None and config.webfetch.allow_loopback
    with pytest.raises(msgspec.ValidationError):
        msgspec.convert({"websearch": {"backend": "bing"}}, Config)
