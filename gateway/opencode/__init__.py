"""OpenCode's API beside the V2 core: the V1 projection (routes, events, the assistant
messages being written), project, file, config, todo, question, revert and LSP routes in
OpenCode's shapes, and ``kittiwake tui``, the launcher of OpenCode's own terminal UI.
"""

from gateway.opencode._diff import session_diffs as session_diffs
from gateway.opencode._lsp import lsp_routes as lsp_routes
from gateway.opencode._project import FileLimits as FileLimits
from gateway.opencode._project import project_routes as project_routes
from gateway.opencode._revert import revert_routes as revert_routes
from gateway.opencode._session_tools import QuestionReplyBody as QuestionReplyBody
from gateway.opencode._session_tools import session_tool_routes as session_tool_routes
from gateway.opencode._state import OpenCodeGateway as OpenCodeGateway
from gateway.opencode._state import opencode_routes as opencode_routes
from gateway.opencode._v1 import v1_session_routes as v1_session_routes
from gateway.opencode._v1_actions import UserShell as UserShell
from gateway.opencode._v1_actions import v1_action_routes as v1_action_routes
from gateway.opencode._v1_catalog import v1_catalog_routes as v1_catalog_routes
from gateway.opencode._v1_events import Idle as Idle
from gateway.opencode._v1_events import Lookup as Lookup
from gateway.opencode._v1_events import StatusBoard as StatusBoard
from gateway.opencode._v1_events import V1Projection as V1Projection
from gateway.opencode._v1_live import LiveAnswers as LiveAnswers
from gateway.opencode._v1_next import NextEvents as NextEvents
from gateway.opencode._v1_next import delivery_lookup as delivery_lookup

__all__ = [
    "FileLimits",
    "Idle",
    "LiveAnswers",
    "Lookup",
    "NextEvents",
    "OpenCodeGateway",
    "QuestionReplyBody",
    "StatusBoard",
    "UserShell",
    "V1Projection",
    "delivery_lookup",
    "lsp_routes",
    "opencode_routes",
    "project_routes",
    "revert_routes",
    "session_diffs",
    "session_tool_routes",
    "v1_action_routes",
    "v1_catalog_routes",
    "v1_session_routes",
]
