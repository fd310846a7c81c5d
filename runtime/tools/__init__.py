"""The Location-scoped Tool Registry, bounded Model Tool Output and built-in tools."""

from runtime.tools._authority import ResolvedPath as ResolvedPath
from runtime.tools._authority import resolve_path as resolve_path
from runtime.tools._authorize import permit as permit
from runtime.tools._bounding import apply_bounding as apply_bounding
from runtime.tools._bounding import bounding_text as bounding_text
from runtime.tools._bounding import exceeds_limits as exceeds_limits
from runtime.tools._bounding import preview as preview
from runtime.tools._bounding import truncation_marker as truncation_marker
from runtime.tools._builtin import builtin_tools as builtin_tools
from runtime.tools._builtin import location_registry as location_registry
from runtime.tools._custom import CustomTools as CustomTools
from runtime.tools._custom import import_file as import_file
from runtime.tools._custom import load_custom_tools as load_custom_tools
from runtime.tools._diff import FilePatch as FilePatch
from runtime.tools._diff import file_patch as file_patch
from runtime.tools._diff import patch_counts as patch_counts
from runtime.tools._hooks import ToolHooks as ToolHooks
from runtime.tools._managed import DEFAULT_CLEANUP_EVERY as DEFAULT_CLEANUP_EVERY
from runtime.tools._managed import cleanup_tool_output as cleanup_tool_output
from runtime.tools._managed import run_tool_output_cleanup as run_tool_output_cleanup
from runtime.tools._managed import write_managed_output as write_managed_output
from runtime.tools._model import CommandResult as CommandResult
from runtime.tools._model import CommandRun as CommandRun
from runtime.tools._model import ContentPart as ContentPart
from runtime.tools._model import ToolContext as ToolContext
from runtime.tools._model import ToolEnvironment as ToolEnvironment
from runtime.tools._model import ToolError as ToolError
from runtime.tools._model import ToolFailure as ToolFailure
from runtime.tools._model import ToolIO as ToolIO
from runtime.tools._model import ToolOutput as ToolOutput
from runtime.tools._model import ToolOutputLimits as ToolOutputLimits
from runtime.tools._model import ToolSettlement as ToolSettlement
from runtime.tools._model import ToolSuccess as ToolSuccess
from runtime.tools._patch import ApplyPatchInput as ApplyPatchInput
from runtime.tools._patch import apply_patch_tool as apply_patch_tool
from runtime.tools._patch_parse import PatchOp as PatchOp
from runtime.tools._patch_parse import UpdateChunk as UpdateChunk
from runtime.tools._patch_parse import apply_chunks as apply_chunks
from runtime.tools._patch_parse import parse_patch as parse_patch
from runtime.tools._read import ReadInput as ReadInput
from runtime.tools._read import ReadLimits as ReadLimits
from runtime.tools._read import read_tool as read_tool
from runtime.tools._registry import BeforeChange as BeforeChange
from runtime.tools._registry import EditObserver as EditObserver
from runtime.tools._registry import EditReport as EditReport
from runtime.tools._registry import ToolContribution as ToolContribution
from runtime.tools._registry import ToolRegistry as ToolRegistry
from runtime.tools._registry import ToolRegistryStatistics as ToolRegistryStatistics
from runtime.tools._registry import before_image as before_image
from runtime.tools._search import GlobInput as GlobInput
from runtime.tools._search import GrepInput as GrepInput
from runtime.tools._search import SearchLimits as SearchLimits
from runtime.tools._search import glob_regex as glob_regex
from runtime.tools._search import glob_tool as glob_tool
from runtime.tools._search import grep_tool as grep_tool
from runtime.tools._session_tools import PLAN_EXIT_QUESTION as PLAN_EXIT_QUESTION
from runtime.tools._session_tools import AgentToolHost as AgentToolHost
from runtime.tools._session_tools import QuestionDismissed as QuestionDismissed
from runtime.tools._session_tools import QuestionInput as QuestionInput
from runtime.tools._session_tools import TaskInput as TaskInput
from runtime.tools._session_tools import TaskResult as TaskResult
from runtime.tools._session_tools import TodoWriteInput as TodoWriteInput
from runtime.tools._session_tools import session_tools as session_tools
from runtime.tools._session_tools import task_description as task_description
from runtime.tools._shell import ShellEnv as ShellEnv
from runtime.tools._shell import ShellInput as ShellInput
from runtime.tools._shell import ShellLimits as ShellLimits
from runtime.tools._shell import reporting_output as reporting_output
from runtime.tools._shell import shell_environment as shell_environment
from runtime.tools._shell import shell_tool as shell_tool
from runtime.tools._skill import Skill as Skill
from runtime.tools._skill import SkillInput as SkillInput
from runtime.tools._skill import SkillLimits as SkillLimits
from runtime.tools._skill import SkillLoad as SkillLoad
from runtime.tools._skill import load_skills as load_skills
from runtime.tools._skill import read_skill as read_skill
from runtime.tools._skill import skill_folders as skill_folders
from runtime.tools._skill import skill_tool as skill_tool
from runtime.tools._tool import TOOL_NAME_PATTERN as TOOL_NAME_PATTERN
from runtime.tools._tool import Tool as Tool
from runtime.tools._tool import input_schema as input_schema
from runtime.tools._write import EditInput as EditInput
from runtime.tools._write import WriteInput as WriteInput
from runtime.tools._write import edit_tool as edit_tool
from runtime.tools._write import write_tool as write_tool
from runtime.tools.lsp import LanguageServer as LanguageServer
from runtime.tools.lsp import LanguageServers as LanguageServers
from runtime.tools.lsp import LspError as LspError
from runtime.tools.lsp import LspInput as LspInput
from runtime.tools.lsp import LspLimits as LspLimits
from runtime.tools.lsp import ServerSpec as ServerSpec
from runtime.tools.lsp import builtin_server_specs as builtin_server_specs
from runtime.tools.lsp import lsp_tool as lsp_tool
from runtime.tools.lsp import server_specs as server_specs
from runtime.tools.web import AddressPolicy as AddressPolicy
from runtime.tools.web import SearchResult as SearchResult
from runtime.tools.web import WebFetchInput as WebFetchInput
from runtime.tools.web import WebFetchLimits as WebFetchLimits
from runtime.tools.web import WebSearchInput as WebSearchInput
from runtime.tools.web import WebSearchSettings as WebSearchSettings
from runtime.tools.web import address_kind as address_kind
from runtime.tools.web import html_to_markdown as html_to_markdown
from runtime.tools.web import html_to_text as html_to_text
from runtime.tools.web import parse_search_answer as parse_search_answer
from runtime.tools.web import search_request as search_request
from runtime.tools.web import webfetch_tool as webfetch_tool
from runtime.tools.web import websearch_tool as websearch_tool

__all__ = [
    "AddressPolicy",
    "AgentToolHost",
    "ApplyPatchInput",
    "BeforeChange",
    "CommandResult",
    "CommandRun",
    "ContentPart",
    "CustomTools",
    "DEFAULT_CLEANUP_EVERY",
    "EditInput",
    "EditObserver",
    "EditReport",
    "FilePatch",
    "GlobInput",
    "GrepInput",
    "LanguageServer",
    "LanguageServers",
    "LspError",
    "LspInput",
    "LspLimits",
    "PLAN_EXIT_QUESTION",
    "PatchOp",
    "QuestionDismissed",
    "QuestionInput",
    "ReadInput",
    "ReadLimits",
    "ResolvedPath",
    "SearchLimits",
    "SearchResult",
    "ServerSpec",
    "ShellEnv",
    "ShellInput",
    "ShellLimits",
    "Skill",
    "SkillInput",
    "SkillLimits",
    "SkillLoad",
    "TOOL_NAME_PATTERN",
    "TaskInput",
    "TaskResult",
    "TodoWriteInput",
    "Tool",
    "ToolContext",
    "ToolContribution",
    "ToolEnvironment",
    "ToolError",
    "ToolFailure",
    "ToolHooks",
    "ToolIO",
    "ToolOutput",
    "ToolOutputLimits",
    "ToolRegistry",
    "ToolRegistryStatistics",
    "ToolSettlement",
    "ToolSuccess",
    "UpdateChunk",
    "WebFetchInput",
    "WebFetchLimits",
    "WebSearchInput",
    "WebSearchSettings",
    "WriteInput",
    "address_kind",
    "apply_bounding",
    "apply_chunks",
    "apply_patch_tool",
    "before_image",
    "bounding_text",
    "builtin_server_specs",
    "builtin_tools",
    "cleanup_tool_output",
    "edit_tool",
    "exceeds_limits",
    "file_patch",
    "glob_regex",
    "glob_tool",
    "grep_tool",
    "html_to_markdown",
    "html_to_text",
    "import_file",
    "input_schema",
    "load_custom_tools",
    "load_skills",
    "location_registry",
    "lsp_tool",
    "parse_patch",
    "parse_search_answer",
    "patch_counts",
    "permit",
    "preview",
    "read_skill",
    "read_tool",
    "reporting_output",
    "resolve_path",
    "run_tool_output_cleanup",
    "search_request",
    "server_specs",
    "session_tools",
    "shell_environment",
    "shell_tool",
    "skill_folders",
    "skill_tool",
    "task_description",
    "truncation_marker",
    "webfetch_tool",
    "websearch_tool",
    "write_managed_output",
    "write_tool",
]
