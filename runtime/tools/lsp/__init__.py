"""Language servers for a Location: one supervised server process per language, spoken to
in JSON-RPC with LSP framing, diagnostics after edits and the ``lsp`` tool."""

from runtime.tools.lsp._server import LanguageServer as LanguageServer
from runtime.tools.lsp._server import LspError as LspError
from runtime.tools.lsp._server import LspLimits as LspLimits
from runtime.tools.lsp._server import ServerSpec as ServerSpec
from runtime.tools.lsp._servers import LanguageServers as LanguageServers
from runtime.tools.lsp._servers import LspInput as LspInput
from runtime.tools.lsp._servers import builtin_server_specs as builtin_server_specs
from runtime.tools.lsp._servers import lsp_tool as lsp_tool
from runtime.tools.lsp._servers import server_specs as server_specs

__all__ = [
    "LanguageServer",
    "LanguageServers",
    "LspError",
    "LspInput",
    "LspLimits",
    "ServerSpec",
    "builtin_server_specs",
    "lsp_tool",
    "server_specs",
]
