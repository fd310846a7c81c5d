"""A Location's language servers: lazy start per file type, diagnostics after edits, the
``lsp`` tool.

``LanguageServers.run`` holds the nursery the servers run in (a Location's owner starts
it); a server starts at the first file of its extensions that an edit touches or ``lsp``
names. ``after_edit`` (the registry's edit observer) syncs each touched file to its server
(``didOpen`` then full-text ``didChange``) and waits for the diagnostics it publishes:
until a first publication after the change, then until none follows for
``diagnostics_settle``, within ``diagnostics_timeout``. Errors only (severity 1), at most 20
per file, are appended to the edit's result as text and kept in its structured result.
"""

from __future__ import annotations

import os
import shutil
import sys
import sysconfig
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Final, Literal

import msgspec
import trio

from runtime.llm import TextPart
from runtime.tools._authority import resolve_path
from runtime.tools._model import ToolContext, ToolEnvironment, ToolError, ToolOutput
from runtime.tools._registry import EditReport
from runtime.tools._tool import Tool
from runtime.tools.lsp._server import LanguageServer, LspError, LspLimits, ServerSpec, converter

if TYPE_CHECKING:
    from lsprotocol import types as lsp

__all__ = ["LanguageServers", "LspInput", "builtin_server_specs", "lsp_tool", "server_specs"]

_MAX_PER_FILE: Final = 20
_LANGUAGE_IDS: Final = {
    ".py": "python", ".pyi": "python", ".ts": "typescript", ".tsx": "typescriptreact",
    ".js": "javascript", ".jsx": "javascriptreact", ".mjs": "javascript", ".cjs": "javascript",
    ".go": "go", ".rs": "rust",
}  # fmt: skip
_BUILTIN: Final = (
    ("pylsp", ["pylsp"], [".py", ".pyi"]),
    ("pyright", ["pyright-langserver", "--stdio"], [".py", ".pyi"]),
    ("typescript", ["typescript-language-server", "--stdio"],
     [".ts", ".tsx", ".js", ".jsx", ".mjs", ".cjs"]),
    ("gopls", ["gopls"], [".go"]),
    ("rust-analyzer", ["rust-analyzer"], [".rs"]),
)  # fmt: skip
_SEVERITY: Final = {1: "ERROR", 2: "WARN", 3: "INFO", 4: "HINT"}


def find_program(name: str) -> str | None:
    """The executable *name* on PATH, else in Kittiwake's own environment: the running
    interpreter's scripts directory and its own directory (a virtualenv's ``bin``, which
    ``.venv/bin/kittiwake`` runs from without it being on PATH). ``None`` when neither has
    it. Blocking (it searches directories)."""
    own = dict.fromkeys([sysconfig.get_path("scripts"), os.path.dirname(sys.executable)])
    return shutil.which(name) or shutil.which(name, path=os.pathsep.join(d for d in own if d))


def builtin_server_specs(which: Callable[[str], str | None] = find_program) -> list[ServerSpec]:
    """The built-in servers whose program *which* finds (by default ``find_program``: on
    PATH, else in Kittiwake's own environment), run by the path found; of two for the same
    files (pylsp, pyright) the first found wins. Blocking (it searches directories)."""
    found: list[ServerSpec] = []
    claimed: set[str] = set()
    for name, command, extensions in _BUILTIN:
        program = None if claimed.intersection(extensions) else which(command[0])
        if program is None:
            continue
        found.append(ServerSpec(name=name, command=[program, *command[1:]], extensions=extensions))
        claimed.update(extensions)
    return found


def server_specs(
    configured: bool | Mapping[str, Any] | None,
    which: Callable[[str], str | None] = find_program,
) -> list[ServerSpec]:
    """The servers of a Location from its ``lsp`` configuration.

    ``false``: none. Unset or ``true``: the built-ins *which* finds (``find_program``). An
    object: its entries with a ``command`` first (they win for their extensions), then the
    built-ins it does not disable (``{"name": {"disabled": true}}``). Blocking (it searches
    directories).
    """
    if configured is False:
        return []
    entries = configured if isinstance(configured, Mapping) else {}
    specs = [
        ServerSpec(
            name=name,
            command=list(entry.command),
            extensions=list(entry.extensions or []),
            env=dict(entry.env or {}),
            initialization=entry.initialization,
        )  # fmt: skip
        for name, entry in entries.items()
        if entry.command and not entry.disabled
    ]
    off = {name for name, entry in entries.items() if entry.disabled}
    specs.extend(s for s in builtin_server_specs(which) if s.name not in off)
    return specs


class LanguageServers:
    """The language servers of one Location (see the module docstring).

    Args:
        directory: the Location.
        specs: the current server specs (read at each use).
        limits: the current timeouts.
    """

    def __init__(
        self, directory: str, specs: Callable[[], list[ServerSpec]],
        limits: Callable[[], LspLimits],
    ) -> None:  # fmt: skip
        self.directory = os.path.realpath(directory)
        self._specs = specs
        self._limits = limits
        self.servers: dict[str, LanguageServer] = {}
        self._nursery: trio.Nursery | None = None

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Host the servers until cancelled; cancellation kills every server process."""
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                task_status.started()
                await trio.sleep_forever()
        finally:
            self._nursery = None

    def server_for(self, path: str) -> LanguageServer | None:
        """The server for *path*'s extension, made (not started) at first need."""
        extension = os.path.splitext(path)[1]
        spec = next((s for s in self._specs() if extension in s.extensions), None)
        if spec is None:
            return None
        server = self.servers.get(spec.name)
        if server is None or (server.spec != spec and not server.running):
            server = self.servers[spec.name] = LanguageServer(spec, self.directory, self._limits)
        return server

    def statuses(self) -> list[dict[str, Any]]:
        """OpenCode's ``LSPStatus`` of every server started and not stopped since."""
        return [
            {"id": s.spec.name, "name": s.spec.name, "root": s.root, "status": s.status}
            for s in self.servers.values()
            if s.status in ("connected", "error")
        ]

    async def _start(self, server: LanguageServer) -> None:
        if self._nursery is None:
            raise LspError("language servers are not running for this Location")
        server.ensure(self._nursery)
        await server.wait_ready()

    async def sync(self, server: LanguageServer, path: str) -> tuple[str, int]:
        """Send *path*'s current text (open, or a full change); return its URI and the
        publication count before. Reads the file in a worker thread."""
        from lsprotocol import types as lsp  # deferred: importing it takes ~0.3-1 s

        text = await trio.to_thread.run_sync(_read_text, path, abandon_on_cancel=True)
        uri = Path(path).as_uri()
        before = server.published.get(uri, 0)
        version = server.versions.get(uri)
        if version is None:
            server.versions[uri] = 1
            language = _LANGUAGE_IDS.get(os.path.splitext(path)[1], "plaintext")
            document = lsp.TextDocumentItem(uri=uri, language_id=language, version=1, text=text)
            await server.notify(
                lsp.TEXT_DOCUMENT_DID_OPEN, lsp.DidOpenTextDocumentParams(text_document=document)
            )
        else:
            server.versions[uri] = version + 1
            change = lsp.DidChangeTextDocumentParams(
                text_document=lsp.VersionedTextDocumentIdentifier(uri=uri, version=version + 1),
                content_changes=[lsp.TextDocumentContentChangeWholeDocument(text=text)],
            )
            await server.notify(lsp.TEXT_DOCUMENT_DID_CHANGE, change)
        return uri, before

    async def diagnostics(self, path: str) -> tuple[lsp.Diagnostic, ...] | None:
        """Sync absolute *path* and wait for its diagnostics; ``None`` when no server
        handles its type. Raises ``LspError`` when its server cannot be used."""
        server = self.server_for(path)
        if server is None:
            return None
        with server.using():
            return await self._diagnostics(server, path)

    async def _diagnostics(
        self, server: LanguageServer, path: str
    ) -> tuple[lsp.Diagnostic, ...] | None:
        await self._start(server)
        uri, before = await self.sync(server, path)
        limits = self._limits()
        with trio.move_on_after(limits.diagnostics_timeout):
            while server.published.get(uri, 0) <= before:
                await server.changed.wait()
            while True:
                count = server.published.get(uri, 0)
                with trio.move_on_after(limits.diagnostics_settle):
                    while server.published.get(uri, 0) == count:
                        await server.changed.wait()
                if server.published.get(uri, 0) == count:
                    break
        return server.diagnostics.get(uri, ())

    async def after_edit(self, paths: list[str]) -> EditReport:
        """The error diagnostics of the touched *paths* (relative to the Location): as text
        to append to an edit's result and as LSP ``Diagnostic`` JSON by path (errors only,
        at most ``_MAX_PER_FILE`` a file). Files of no configured type are skipped; a server
        that cannot be used is skipped (logged by its supervisor)."""
        found: dict[str, tuple[lsp.Diagnostic, ...]] = {}

        async def one(relative: str) -> None:
            try:
                diagnostics = await self.diagnostics(os.path.join(self.directory, relative))
            except (LspError, OSError):
                return
            if diagnostics:
                found[relative] = diagnostics

        async with trio.open_nursery() as nursery:
            for relative in dict.fromkeys(paths):
                nursery.start_soon(one, relative)
        ordered = {p: found[p] for p in paths if p in found}
        errors = {p: _errors(d)[:_MAX_PER_FILE] for p, d in ordered.items()}
        return EditReport(
            note=format_errors(ordered),
            diagnostics={
                p: [converter().unstructure(d) for d in e] for p, e in errors.items() if e
            },
        )

    async def request(self, path: str, method: str, params: Any) -> Any:
        """Sync *path*, then send *method*; raises ``LspError`` (no server included)."""
        server = self.server_for(path)
        if server is None:
            raise LspError(_no_server(path))
        with server.using():
            await self._start(server)
            await self.sync(server, path)
            return await server.request(method, params)


def _no_server(path: str) -> str:
    extension = os.path.splitext(path)[1] or "extensionless"
    return f"No language server is configured or installed for {extension} files"


def _read_text(path: str) -> str:
    with open(path, encoding="utf-8", errors="replace") as handle:
        return handle.read()


def _line(diagnostic: lsp.Diagnostic) -> str:
    start = diagnostic.range.start
    severity = _SEVERITY.get(int(diagnostic.severity or 1), "ERROR")
    source = f" ({diagnostic.source})" if diagnostic.source else ""
    return f"{severity} [{start.line + 1}:{start.character + 1}] {diagnostic.message}{source}"


def _errors(diagnostics: tuple[lsp.Diagnostic, ...]) -> list[lsp.Diagnostic]:
    return [d for d in diagnostics if int(d.severity or 1) == 1]


def format_errors(found: Mapping[str, tuple[lsp.Diagnostic, ...]]) -> str | None:
    """The error blocks appended to an edit's result, or ``None`` when there are none."""
    blocks = []
    for path, diagnostics in found.items():
        errors = _errors(diagnostics)
        if errors:
            lines = [_line(d) for d in errors[:_MAX_PER_FILE]]
            if len(errors) > _MAX_PER_FILE:
                lines.append(f"... and {len(errors) - _MAX_PER_FILE} more")
            blocks.append(f'<diagnostics file="{path}">\n' + "\n".join(lines) + "\n</diagnostics>")
    if not blocks:
        return None
    return "\n\nLSP errors detected in the edited files, please fix:\n" + "\n".join(blocks)


class LspInput(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """Input of ``lsp``: an operation on the file ``filePath``, at a 1-based line and
    character."""

    operation: Literal["diagnostics", "goToDefinition", "findReferences", "hover", "documentSymbol"]
    file_path: str
    line: Annotated[int, msgspec.Meta(ge=1)] = 1
    character: Annotated[int, msgspec.Meta(ge=1)] = 1


DESCRIPTION: Final = (
    "Ask the language server of a file: diagnostics, goToDefinition, findReferences, hover or "
    "documentSymbol. filePath is relative to the project directory; line and character are "
    "1-based (as shown by read)."
)


def lsp_tool(servers: LanguageServers) -> Tool[LspInput]:
    """The ``lsp`` tool (permission ``lsp``, resource: the file's path)."""

    async def handler(data: LspInput, ctx: ToolContext, env: ToolEnvironment) -> ToolOutput:
        target = resolve_path(env, data.file_path)
        try:
            text, structured = await _operate(servers, target.absolute, data)
        except LspError as exc:
            raise ToolError(str(exc)) from None
        return ToolOutput(content=[TextPart(text=text)], structured=structured)

    return Tool(
        name="lsp",
        description=DESCRIPTION,
        input_type=LspInput,
        handler=handler,
        permission="lsp",
        resources=lambda data, env: [resolve_path(env, data.file_path).resource],
    )


async def _operate(servers: LanguageServers, path: str, data: LspInput) -> tuple[str, Any]:
    from lsprotocol import types as lsp  # deferred: importing it takes ~0.3-1 s

    if data.operation == "diagnostics":
        found = await servers.diagnostics(path)
        if found is None:
            raise LspError(_no_server(path))
        lines = [_line(d) for d in found or ()]
        return ("\n".join(lines) or "No diagnostics."), {"diagnostics": lines}
    document = lsp.TextDocumentIdentifier(uri=Path(path).as_uri())
    position = lsp.Position(line=data.line - 1, character=data.character - 1)
    if data.operation == "hover":
        params: Any = lsp.HoverParams(text_document=document, position=position)
        result = await servers.request(path, lsp.TEXT_DOCUMENT_HOVER, params)
        text = _hover_text(converter().structure(result, lsp.Hover) if result else None)
        return text or "No hover information.", {"hover": text}
    if data.operation == "documentSymbol":
        params = lsp.DocumentSymbolParams(text_document=document)
        result = await servers.request(path, lsp.TEXT_DOCUMENT_DOCUMENT_SYMBOL, params)
        lines = _symbols(result or [], servers.directory)
        return "\n".join(lines) or "No symbols.", {"symbols": lines}
    if data.operation == "goToDefinition":
        params = lsp.DefinitionParams(text_document=document, position=position)
        method = lsp.TEXT_DOCUMENT_DEFINITION
    else:
        params = lsp.ReferenceParams(
            text_document=document, position=position,
            context=lsp.ReferenceContext(include_declaration=True),
        )  # fmt: skip
        method = lsp.TEXT_DOCUMENT_REFERENCES
    result = await servers.request(path, method, params)
    locations = [_where(item, servers.directory) for item in _as_list(result)]
    return "\n".join(locations) or "No results.", {"locations": locations}


def _as_list(result: Any) -> list[Any]:
    if result is None:
        return []
    return result if isinstance(result, list) else [result]


def _relative(uri: str, root: str) -> str:
    path = uri.removeprefix("file://")
    return os.path.relpath(path, root) if path.startswith(root + os.sep) else path


def _where(item: Any, root: str) -> str:
    from lsprotocol import types as lsp  # deferred: importing it takes ~0.3-1 s

    if isinstance(item, dict) and "targetUri" in item:
        link = converter().structure(item, lsp.LocationLink)
        uri, start = link.target_uri, link.target_selection_range.start
    else:
        location = converter().structure(item, lsp.Location)
        uri, start = location.uri, location.range.start
    return f"{_relative(uri, root)}:{start.line + 1}:{start.character + 1}"


def _hover_text(hover: lsp.Hover | None) -> str:
    if hover is None:
        return ""
    contents = hover.contents
    parts = contents if isinstance(contents, list) else [contents]
    texts = [p if isinstance(p, str) else getattr(p, "value", "") for p in parts]
    return "\n\n".join(t for t in texts if t).strip()


def _symbols(result: list[Any], root: str, depth: int = 0) -> list[str]:
    from lsprotocol import types as lsp  # deferred: importing it takes ~0.3-1 s

    lines: list[str] = []
    for item in result:
        if "location" in item:
            information = converter().structure(item, lsp.SymbolInformation)
            name, kind, start = information.name, information.kind, information.location.range.start
            children: list[Any] = []
        else:
            symbol = converter().structure(item, lsp.DocumentSymbol)
            name, kind, start = symbol.name, symbol.kind, symbol.selection_range.start
            children = item.get("children") or []
        label = lsp.SymbolKind(kind).name
        lines.append(f"{'  ' * depth}{label} {name} (line {start.line + 1})")
        lines.extend(_symbols(children, root, depth + 1))
    return lines
