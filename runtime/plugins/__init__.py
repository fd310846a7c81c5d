"""Kittiwake's plugins: Python packages adding tools, Context Sources, environment and
policy to a Location through one hook API (pluggy's, project ``kittiwake``).

A plugin is found through an installed package's ``kittiwake.plugins`` entry point, a file
in ``.kittiwake/plugins/`` (or the global configuration folder's ``plugins/``), or the
configuration's ``plugin`` key; each open Location's :class:`LocationPlugins` loads its
plugins, waits for them, and calls their hooks in isolation. The hooks and their values
are the SDK's contract (``docs/plugins.md``).

pluggy and the hook specifications (``hookimpl``, ``hookspec``, ``PluginSpec``,
``HOOK_NAMES``) load on first use (PEP 562) or with a Location's first plugin, so a server
whose Locations have no plugins never imports them.
"""

from __future__ import annotations

import typing as _typing

from runtime import Prompt as Prompt
from runtime import lazy_attribute as _lazy_attribute
from runtime.agents import PermissionAction as PermissionAction
from runtime.context import UNAVAILABLE as UNAVAILABLE
from runtime.context import SystemContext as SystemContext
from runtime.context import Unavailable as Unavailable
from runtime.events import AgentAttachment as AgentAttachment
from runtime.events import FileAttachment as FileAttachment
from runtime.llm import ApiKeyCredential as ApiKeyCredential
from runtime.llm import OAuthCredential as OAuthCredential
from runtime.llm import TextPart as TextPart
from runtime.llm import ToolDefinition as ToolDefinition
from runtime.plugins._auth import AuthCondition as AuthCondition
from runtime.plugins._auth import AuthFailed as AuthFailed
from runtime.plugins._auth import AuthMethod as AuthMethod
from runtime.plugins._auth import AuthOption as AuthOption
from runtime.plugins._auth import AuthPrompt as AuthPrompt
from runtime.plugins._auth import OAuthAuthorization as OAuthAuthorization
from runtime.plugins._auth import ProviderAuth as ProviderAuth
from runtime.plugins._auth import ProviderAuthAuthorization as ProviderAuthAuthorization
from runtime.plugins._auth import ProviderAuthMethod as ProviderAuthMethod
from runtime.plugins._auth import auth_shape as auth_shape
from runtime.plugins._context import PluginContext as PluginContext
from runtime.plugins._context import ProcessLimits as ProcessLimits
from runtime.plugins._context import ProcessResult as ProcessResult
from runtime.plugins._functions import ToolMeta as ToolMeta
from runtime.plugins._functions import as_tool as as_tool
from runtime.plugins._functions import plugin_tool as plugin_tool
from runtime.plugins._functions import tool_call_of as tool_call_of
from runtime.plugins._hooks import LocationPlugins as LocationPlugins
from runtime.plugins._host import PluginHost as PluginHost
from runtime.plugins._host import namespace as namespace
from runtime.plugins._load import ENTRY_POINT_GROUP as ENTRY_POINT_GROUP
from runtime.plugins._load import PLUGIN_DIRS as PLUGIN_DIRS
from runtime.plugins._load import PluginCandidate as PluginCandidate
from runtime.plugins._load import PluginDiscovery as PluginDiscovery
from runtime.plugins._load import PluginSource as PluginSource
from runtime.plugins._load import discover_plugins as discover_plugins
from runtime.plugins._load import parse_plugin_entry as parse_plugin_entry
from runtime.plugins._status import PluginFailure as PluginFailure
from runtime.plugins._status import PluginHookError as PluginHookError
from runtime.plugins._status import PluginLimits as PluginLimits
from runtime.plugins._status import PluginsNotReady as PluginsNotReady
from runtime.plugins._status import PluginState as PluginState
from runtime.plugins._status import PluginStatus as PluginStatus
from runtime.plugins._values import PROJECT_NAME as PROJECT_NAME
from runtime.plugins._values import ChatInfo as ChatInfo
from runtime.plugins._values import ChatMessage as ChatMessage
from runtime.plugins._values import ChatParams as ChatParams
from runtime.plugins._values import CommandCall as CommandCall
from runtime.plugins._values import CompactionPrompt as CompactionPrompt
from runtime.plugins._values import PermissionAsk as PermissionAsk
from runtime.plugins._values import PluginEvent as PluginEvent
from runtime.plugins._values import Refusal as Refusal
from runtime.plugins._values import SessionRef as SessionRef
from runtime.plugins._values import ShellEnvInfo as ShellEnvInfo
from runtime.plugins._values import ToolCall as ToolCall
from runtime.plugins._values import ToolLike as ToolLike
from runtime.plugins._values import ToolResult as ToolResult
from runtime.tools import Tool as Tool
from runtime.tools import ToolError as ToolError
from runtime.tools import ToolFailure as ToolFailure
from runtime.tools import ToolOutput as ToolOutput

if _typing.TYPE_CHECKING:
    from runtime.plugins._spec import HOOK_NAMES as HOOK_NAMES
    from runtime.plugins._spec import PluginSpec as PluginSpec
    from runtime.plugins._spec import hookimpl as hookimpl
    from runtime.plugins._spec import hookspec as hookspec

__all__ = [
    "AgentAttachment",
    "ApiKeyCredential",
    "AuthCondition",
    "AuthFailed",
    "AuthMethod",
    "AuthOption",
    "AuthPrompt",
    "ChatInfo",
    "ChatMessage",
    "ChatParams",
    "CommandCall",
    "CompactionPrompt",
    "ENTRY_POINT_GROUP",
    "FileAttachment",
    "HOOK_NAMES",
    "LocationPlugins",
    "OAuthAuthorization",
    "OAuthCredential",
    "PLUGIN_DIRS",
    "PROJECT_NAME",
    "PermissionAction",
    "PermissionAsk",
    "PluginCandidate",
    "PluginContext",
    "PluginDiscovery",
    "PluginEvent",
    "PluginFailure",
    "PluginHookError",
    "PluginHost",
    "PluginLimits",
    "PluginSource",
    "PluginSpec",
    "PluginState",
    "PluginStatus",
    "PluginsNotReady",
    "ProcessLimits",
    "ProcessResult",
    "Prompt",
    "ProviderAuth",
    "ProviderAuthAuthorization",
    "ProviderAuthMethod",
    "Refusal",
    "SessionRef",
    "ShellEnvInfo",
    "SystemContext",
    "TextPart",
    "Tool",
    "ToolCall",
    "ToolDefinition",
    "ToolError",
    "ToolFailure",
    "ToolLike",
    "ToolMeta",
    "ToolOutput",
    "ToolResult",
    "UNAVAILABLE",
    "Unavailable",
    "as_tool",
    "auth_shape",
    "discover_plugins",
    "hookimpl",
    "hookspec",
    "namespace",
    "parse_plugin_entry",
    "plugin_tool",
    "tool_call_of",
]

_LAZY = dict.fromkeys(("HOOK_NAMES", "PluginSpec", "hookimpl", "hookspec"), "runtime.plugins._spec")
"""The names of ``runtime.plugins._spec``, which imports pluggy."""


def __getattr__(name: str) -> _typing.Any:
    return _lazy_attribute(__name__, _LAZY, name)


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
