"""An MCP server for the tests, written with the ``mcp`` package's server API (FastMCP).

``python server.py stdio`` or ``python server.py http PORT`` (Streamable HTTP on
127.0.0.1, or ``sse PORT`` for the legacy transport). What it sees worth checking
(its pid, a cancelled call, a grandchild's pid) is appended as JSON lines to the file
named by ``MCP_RECORD``. With ``MCP_CHILD=1`` it starts a grandchild process that sleeps;
with ``MCP_TOOLS=N`` it lists N more tools, ``ledger_000`` to ``ledger_<N-1>``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import anyio
from mcp.server.fastmcp import Context, FastMCP, Image
from mcp.types import SamplingMessage, TextContent

server = FastMCP("test-server", host="127.0.0.1")
RECORD = os.environ.get("MCP_RECORD")
CANCELLED: list[object] = []
_events: dict[str, anyio.Event] = {}


def some_cancelled() -> anyio.Event:
    """Set once a request was cancelled (made inside the server's event loop)."""
    return _events.setdefault("cancelled", anyio.Event())


def record(**fields: object) -> None:
    if RECORD:
        with open(RECORD, "a") as handle:
            handle.write(json.dumps(fields) + "\n")


@server.tool()
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@server.tool()
def shout(text: str) -> str:
    """Repeat text in capitals, twice as two text parts."""
    return f"{text.upper()}"


DOT = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6300010000050001ff0d0a2db40000000049454e44ae426082"
)


@server.tool(structured_output=False)
def picture():  # noqa: ANN201 - FastMCP reads no output schema from it
    """Return a caption and a tiny PNG image."""
    return ["a red dot", Image(data=DOT, format="png")]


@server.tool()
def fail() -> str:
    """Always fail."""
    raise ValueError("the tool refused")


@server.tool()
async def slow(steps: int, ctx: Context) -> str:  # type: ignore[type-arg]
    """Take steps * 0.3 s, reporting progress after each step."""
    for step in range(steps):
        await anyio.sleep(0.3)
        await ctx.report_progress(step + 1, steps)
    return f"slept {steps} steps"


@server.tool()
async def hang(ctx: Context) -> str:  # type: ignore[type-arg]
    """Report progress once, then never answer; a cancellation is recorded."""
    await ctx.report_progress(0, 1)
    try:
        await anyio.sleep(3600)
    except anyio.get_cancelled_exc_class():
        CANCELLED.append(ctx.request_id)
        some_cancelled().set()
        raise
    return "woke"


@server.tool()
async def cancelled_requests() -> list[object]:
    """The ids of the requests cancelled so far, once there is one (5 s at most)."""
    with anyio.move_on_after(5):
        await some_cancelled().wait()
    return CANCELLED


@server.tool()
def crash() -> str:
    """Exit the server process at once."""
    record(event="crash", pid=os.getpid())
    os._exit(3)


@server.tool()
async def grow(ctx: Context) -> str:  # type: ignore[type-arg]
    """Add a tool (``extra``, then ``extra2``, ...) and say that the tool list changed."""

    def extra() -> str:
        """A tool added at run time."""
        return "extra!"

    grown = sum(1 for t in await server.list_tools() if t.name.startswith("extra"))
    server.add_tool(extra, name="extra" if not grown else f"extra{grown + 1}")
    await ctx.session.send_tool_list_changed()
    return "grown"


@server.tool()
async def roots(ctx: Context) -> list[str]:  # type: ignore[type-arg]
    """The client's roots, as URIs."""
    listed = await ctx.session.list_roots()
    return [str(root.uri) for root in listed.roots]


ORDER = {
    "type": "object",
    "properties": {
        "flavour": {"type": "string", "title": "Flavour", "enum": ["vanilla", "lemon"]},
        "scoops": {"type": "integer", "title": "Scoops", "description": "How many scoops?"},
        "cone": {"type": "boolean", "title": "Cone"},
        "note": {"type": "string", "title": "Note"},
    },
    "required": ["flavour", "scoops"],
}


@server.tool()
async def order(ctx: Context) -> str:  # type: ignore[type-arg]
    """Ask the user for an ice cream order (elicitation); the answer as JSON."""
    result = await ctx.session.elicit("What would you like?", ORDER, ctx.request_id)
    return result.model_dump_json(exclude_none=True)


@server.tool()
async def summarize(text: str, ctx: Context) -> str:  # type: ignore[type-arg]
    """Have the client's model summarize text (sampling); the answer as JSON."""
    message = SamplingMessage(role="user", content=TextContent(type="text", text=text))
    result = await ctx.session.create_message(
        [message], max_tokens=50, system_prompt="Summarize in five words.",
        related_request_id=ctx.request_id,
    )  # fmt: skip
    return result.model_dump_json(exclude_none=True)


@server.prompt()
def review(path: str, focus: str) -> str:
    """Review a file with a focus."""
    return f"Please review {path}, looking for {focus}."


@server.resource("notes://readme", name="readme", mime_type="text/plain")
def readme() -> str:
    """The project notes."""
    return "Remember the milk."


@server.resource("pictures://dot", name="dot", mime_type="image/png")
def dot() -> bytes:
    """A 1x1 PNG."""
    return DOT


def ledger_tools(count: int) -> None:
    """Add *count* tools that look a key up in ledger ``i`` (many tools, each its own)."""

    def ledger(i: int):  # noqa: ANN202 - FastMCP reads the signature of what it returns
        def look_up(key: str) -> str:
            return f"ledger {i}: {key}"

        return look_up

    for i in range(count):
        server.add_tool(
            ledger(i), name=f"ledger_{i:03d}",
            description=f"Look a key up in ledger number {i} of the archive.",
        )  # fmt: skip


def main() -> None:
    record(event="start", pid=os.getpid(), transport=sys.argv[1])
    ledger_tools(int(os.environ.get("MCP_TOOLS", "0")))
    if os.environ.get("MCP_CHILD"):
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
        record(event="child", pid=child.pid)
    if sys.argv[1] == "stdio":
        server.run("stdio")
    else:
        server.settings.port = int(sys.argv[2])
        server.run("streamable-http" if sys.argv[1] == "http" else "sse")


if __name__ == "__main__":
    main()
