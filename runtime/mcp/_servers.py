"""The MCP servers of one Location: started with it, kept in step with its configuration,
their tools contributed to its registry, their prompts and resources offered."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Collection, Mapping
from typing import Any

import msgspec
import trio

from runtime.agents import AgentInfo, CommandInfo
from runtime.llm import FilePart, ToolDefinition
from runtime.mcp._convert import (
    encoded,
    input_schema,
    prompt_text,
    resource_json,
    resource_parts,
    tool_output,
)
from runtime.mcp._host import McpCall, McpHost
from runtime.mcp._names import command_name, sanitize, tool_ids
from runtime.mcp._search import SEARCH_TOOL, search_tool
from runtime.mcp._server import McpAuth, McpServer
from runtime.mcp._spec import McpLimits, McpServerSpec, McpToolSearch
from runtime.tools import (
    Tool,
    ToolContext,
    ToolContribution,
    ToolEnvironment,
    ToolError,
    ToolOutput,
    ToolRegistry,
)

__all__ = ["McpServerNotFound", "McpServers", "mcp_tool"]


class McpServerNotFound(LookupError):
    """No server of that name in the Location."""

    def __init__(self, name: str) -> None:
        super().__init__(f"MCP server not found: {name}")
        self.name = name


class McpServers:
    """A Location's MCP servers.

    ``run`` (started by whoever opens the Location) hosts them: each connects on its own,
    concurrently, so nothing waits for them; closing the run stops every server in order
    (bounded by ``stop_grace``). ``sync`` follows the configuration (servers added,
    removed or changed are started, stopped or restarted); ``apply`` brings the
    registry in line with what connected servers list, and is meant for the start of
    each provider turn, so a tool list that changed reaches the model at its next turn.

    Args:
        directory: the Location.
        registry: the Location's Tool Registry.
        specs: the configured servers, read at each ``sync``.
        data_dir: where local servers' standard error is written (``log/mcp/``).
        limits: timeouts and bounds.
        auth: signs remote servers' requests in (the OAuth seam; ``None``: headers only).
        on_tools_changed: told the name of a server whose tools changed after it said
            so (``notifications/tools/list_changed``).
        search: the tool search settings, read at each ``apply`` (``None``: off).
        session_id: the servers are that session's own (an editor's): their tools are
            contributed for it alone (``ToolRegistry.contribute``), their logs kept apart,
            and they are withdrawn when ``run`` ends.
    """

    def __init__(
        self, directory: str, registry: ToolRegistry, *,
        specs: Callable[[], Mapping[str, McpServerSpec]], data_dir: str,
        limits: McpLimits | None = None, auth: McpAuth | None = None,
        on_tools_changed: Callable[[str], None] | None = None,
        search: Callable[[], McpToolSearch | None] = McpToolSearch,
        session_id: str | None = None,
    ) -> None:  # fmt: skip
        self.directory = directory
        self.session_id = session_id
        self.registry = registry
        self._specs = specs
        self._search_settings = search
        self.host: McpHost | None = None
        """Records what the servers' sessions need durably (tools found by search)."""
        self.agent_of: Callable[[str], AgentInfo] | None = None
        """The agent of a name (what ``mcp_search`` may find is what it is offered)."""
        self._search: ToolContribution | None = None
        self.limits = limits or McpLimits()
        self._auth = auth
        self.on_tools_changed = on_tools_changed
        """Told the name of a server whose tools changed after it said so."""
        scope = directory if session_id is None else f"{directory}\0{session_id}"
        digest = hashlib.sha256(scope.encode()).hexdigest()[:8]
        self._log_dir = os.path.join(data_dir, "log", "mcp", digest)
        self.servers: dict[str, McpServer] = {}
        self._added: dict[str, McpServerSpec] = {}
        self._switched: dict[str, tuple[McpServerSpec, bool]] = {}
        self._nursery: trio.Nursery | None = None
        self._contributed: dict[str, tuple[tuple[McpServer, bytes], ToolContribution]] = {}
        self._applied: tuple[Any, ...] | None = None
        self._seen_changes: dict[str, int] = {}
        self.changed = trio.Event()
        """Set (and replaced) whenever a server's state changes."""
        self.started = trio.Event()
        """Set once ``run`` has started the configured servers."""

    # -- lifetime ---------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Host the servers until cancelled; on cancellation each is stopped in order
        (``stop_grace`` bounds each)."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            try:
                self.sync()
                self.started.set()
                task_status.started()
                await trio.sleep_forever()
            finally:
                self._nursery = None
                for server in self.servers.values():
                    server.stop()
                if self.session_id is not None:
                    self._withdraw()

    def _withdraw(self) -> None:
        """Close every tool contribution (their calls in flight settle as stale)."""
        for _, contribution in self._contributed.values():
            contribution.close()
        self._contributed.clear()
        if self._search is not None:
            self._search.close()
            self._search = None
        self._applied = None

    def _desired(self) -> dict[str, McpServerSpec]:
        desired = {**self._specs(), **self._added}
        for name, spec in list(desired.items()):
            switched = self._switched.get(name)
            if switched is not None and switched[0] == spec:
                desired[name] = msgspec.structs.replace(spec, enabled=switched[1])
            elif switched is not None:
                del self._switched[name]  # the configuration changed since: it wins
        return desired

    def sync(self) -> None:
        """Start, stop or restart servers so they match the configuration (never
        blocks; a no-op until ``run`` has started)."""
        if self._nursery is None:
            return
        desired = self._desired()
        for name in [n for n in self.servers if n not in desired]:
            self.servers.pop(name).stop()
        for name, spec in desired.items():
            current = self.servers.get(name)
            if current is not None and current.spec == spec:
                continue
            if current is not None:
                current.stop()
            self._start(spec)
        self._note_change()

    def _start(self, spec: McpServerSpec) -> McpServer:
        assert self._nursery is not None
        server = McpServer(
            spec, directory=self.directory, limits=self.limits, auth=self._auth,
            log_path=os.path.join(self._log_dir, f"{sanitize(spec.name)}.log"),
            on_change=self._note_change, host=lambda: self.host,
        )  # fmt: skip
        self.servers[spec.name] = server
        self._nursery.start_soon(server.supervise)
        return server

    def _note_change(self) -> None:
        for name, server in self.servers.items():
            if server.tools_changed != self._seen_changes.get(name, 0):
                self._seen_changes[name] = server.tools_changed
                if self.on_tools_changed is not None:
                    self.on_tools_changed(name)
        self.changed.set()
        self.changed = trio.Event()

    # -- tools --------------------------------------------------------------------------

    def apply(self) -> bool:
        """Contribute the tools of connected servers to the registry, one contribution
        per tool, and close those of tools that went away or changed (their calls in
        flight settle as stale); True when something changed. Cheap when nothing did."""
        search = self._search_settings()
        state = (search, *((n, s, s.generation, s.status) for n, s in self.servers.items()))
        if state == self._applied:
            return False
        self._applied = state
        live = [s for s in self.servers.values() if s.status == "connected"]
        pairs = [(s.name, str(t.get("name", ""))) for s in live for t in s.tools]
        ids = tool_ids(pairs, reserved={SEARCH_TOOL})
        wanted = {ids[(s.name, str(t.get("name", "")))]: (s, t) for s in live for t in s.tools}
        changed = False
        for tool_id, (key, contribution) in list(self._contributed.items()):
            found = wanted.get(tool_id)
            if found is None or found[0] is not key[0] or encoded(found[1]) != key[1]:
                contribution.close()
                del self._contributed[tool_id]
                changed = True
        for tool_id, (server, tool) in wanted.items():
            if tool_id not in self._contributed:
                contribution = self.registry.contribute(
                    mcp_tool(tool_id, server, tool), session_id=self.session_id
                )
                self._contributed[tool_id] = ((server, encoded(tool)), contribution)
                changed = True
        return self._apply_search(search) or changed

    # -- tool search --------------------------------------------------------------------

    def _apply_search(self, settings: McpToolSearch | None) -> bool:
        """Offer ``mcp_search`` exactly while there are more MCP tools than the threshold."""
        active = settings is not None and len(self._contributed) > settings.threshold
        if active == (self._search is not None):
            return False
        if self._search is not None:
            self._search.close()
            self._search = None
        else:
            self._search = self.registry.contribute(
                search_tool(
                    servers=self._tool_counts,
                    candidates=self._candidates,
                    limit=lambda: (self._search_settings() or McpToolSearch()).max_results,
                    found=self._found,
                )  # fmt: skip
            )
        return True

    async def _found(self, session_id: str, tools: list[str]) -> None:
        if self.host is None:
            await trio.lowlevel.checkpoint()
            return
        await self.host.tools_found(session_id, tools)

    @property
    def searching(self) -> bool:
        """Whether ``mcp_search`` stands in for the MCP tools' definitions."""
        return self._search is not None

    def _tool_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for (server, _), _ in self._contributed.values():
            counts[server.name] = counts.get(server.name, 0) + 1
        return counts

    def _candidates(self, agent: str) -> list[ToolDefinition]:
        if self.agent_of is None:
            tools = [c.tools[i] for i, (_, c) in self._contributed.items()]
            return [t.definition() for t in sorted(tools, key=lambda t: t.name)]
        definitions = self.registry.definitions(self.agent_of(agent))
        return [d for d in definitions if d.name in self._contributed]

    def offered(
        self, definitions: list[ToolDefinition], found: Collection[str]
    ) -> list[ToolDefinition]:
        """*definitions* as the model is offered them: while tool search stands, without
        the MCP tools but those in *found* (the session's finds)."""
        if self._search is None:
            return definitions
        return [d for d in definitions if d.name not in self._contributed or d.name in found]

    # -- what the routes use ------------------------------------------------------------

    def statuses(self) -> dict[str, dict[str, Any]]:
        """OpenCode's status map: ``{name: MCPStatus}``."""
        return {name: server.describe() for name, server in self.servers.items()}

    async def settled(self) -> None:
        """Wait until the servers have started and none is connecting (each is bounded by
        ``connect_timeout``; this wait too, a second longer). Cancellation abandons the
        wait."""
        if not self.servers and not self._added and not self._specs():
            await trio.lowlevel.checkpoint()
            return
        with trio.move_on_after(self.limits.connect_timeout + 1):
            await self.started.wait()
            while any(s.status == "connecting" for s in self.servers.values()):
                await self.changed.wait()

    def _named(self, name: str) -> McpServer:
        server = self.servers.get(name)
        if server is None:
            raise McpServerNotFound(name)
        return server

    async def add(self, spec: McpServerSpec) -> dict[str, dict[str, Any]]:
        """Add (or replace) a server for as long as the Location is open, wait until it
        connected or failed; the whole status map."""
        self._added[spec.name] = spec
        self._switched.pop(spec.name, None)
        self.sync()
        await self.settled()
        return self.statuses()

    async def connect(self, name: str) -> None:
        """Enable *name* (until its configuration changes) and connect it again unless it
        is connected; waits until it connected or failed.

        Raises:
            McpServerNotFound: no such server.
        """
        server = self._named(name)
        desired = {**self._specs(), **self._added}
        self._switched[name] = (desired.get(name, server.spec), True)
        if server.status != "connected":
            server.stop()
            self.servers.pop(name)
        self.sync()
        await self.settled()

    def reconnect(self, name: str, *, connected_too: bool = False) -> None:
        """Connect *name* again (after a sign-in or a sign-out) unless it is connected
        (*connected_too*: even then); never blocks, a no-op for an unknown name."""
        server = self.servers.get(name)
        if server is None or self._nursery is None:
            return
        if server.status != "connected" or connected_too:
            server.stop()
            self.servers.pop(name)
            self.sync()

    async def disconnect(self, name: str) -> None:
        """Stop *name* and mark it ``disabled`` until it is connected again or its
        configuration changes.

        Raises:
            McpServerNotFound: no such server.
        """
        server = self._named(name)
        desired = {**self._specs(), **self._added}
        self._switched[name] = (desired.get(name, server.spec), False)
        self.sync()
        await trio.lowlevel.checkpoint()

    def commands(self) -> list[CommandInfo]:
        """The prompts of connected servers as commands ``<server>:<prompt>`` (source
        ``mcp``), their arguments as ``$1``...``$n`` in order."""
        out: list[CommandInfo] = []
        for server in self.servers.values():
            if server.status != "connected":
                continue
            for prompt in server.prompts:
                arity = len(prompt.get("arguments") or [])
                out.append(
                    CommandInfo(
                        name=command_name(server.name, str(prompt.get("name", ""))),
                        template="",
                        description=prompt.get("description"),
                        source="mcp",
                        hints=[f"${i}" for i in range(1, arity + 1)],
                    )  # fmt: skip
                )
        return out

    async def prompt_template(self, command: str) -> str:
        """The template of the command *command* (see :meth:`commands`): the server's
        prompt fetched with ``$1``...``$n`` as its arguments, so that running the
        command puts the caller's arguments in their places.

        Raises:
            McpServerNotFound: no connected server has that prompt.
            ToolError: the server failed to answer.
        """
        for server in self.servers.values():
            for prompt in server.prompts:
                if command_name(server.name, str(prompt.get("name", ""))) == command:
                    names = [str(a.get("name")) for a in prompt.get("arguments") or []]
                    arguments = {n: f"${i}" for i, n in enumerate(names, 1)}
                    result = await server.get_prompt(str(prompt["name"]), arguments)
                    return prompt_text(result)
        raise McpServerNotFound(command.partition(":")[0])

    def resources(self) -> dict[str, dict[str, Any]]:
        """OpenCode's resource map: ``{"<server>:<uri>": McpResource}``."""
        return {
            f"{server.name}:{resource.get('uri')}": resource_json(server.name, resource)
            for server in self.servers.values()
            if server.status == "connected"
            for resource in server.resources
        }

    async def read_resource(self, server: str, uri: str) -> dict[str, Any]:
        """The ``ReadResourceResult`` of *uri* on *server*, as JSON.

        Raises:
            McpServerNotFound: no such server.
            ToolError: the server is not connected or failed to answer.
        """
        return await self._named(server).read_resource(uri)

    async def attachment(
        self, server: str, uri: str, name: str
    ) -> tuple[list[str], list[FilePart]]:
        """What a prompt carries for the resource *uri* of *server* attached to it
        (``resource_parts``): its texts and its blobs as files. A resource that cannot
        be read gives one text, ``Failed to read MCP resource <name>: <why>`` (as
        OpenCode), so the prompt goes in all the same. Cancellation propagates."""
        try:
            result = await self.read_resource(server, uri)
        except (McpServerNotFound, ToolError) as exc:
            return [f"Failed to read MCP resource {name}: {exc}"], []
        return resource_parts(result, name=name, uri=uri, max_chars=self.limits.max_resource_chars)


def mcp_tool(tool_id: str, server: McpServer, tool: Mapping[str, Any]) -> Tool[dict[str, Any]]:
    """The registry's tool for *tool* of *server*: its permission is the tool id (so
    rules such as ``"github_*": "ask"`` apply), its schema the server's, normalised."""
    name = str(tool.get("name", ""))

    async def handler(
        arguments: dict[str, Any], ctx: ToolContext, env: ToolEnvironment
    ) -> ToolOutput:
        return tool_output(await server.call(name, arguments, McpCall(ctx=ctx, tool=tool_id)))

    description = tool.get("description") or f"{name} (MCP server {server.name})"
    return Tool(
        name=tool_id, description=str(description), input_type=dict[str, Any],
        handler=handler, permission=tool_id, schema=input_schema(tool.get("inputSchema")),
    )  # fmt: skip
