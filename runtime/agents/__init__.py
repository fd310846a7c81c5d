"""Agents and permission rules."""

from runtime.agents._agent import BASE_RULES as BASE_RULES
from runtime.agents._agent import BUILD as BUILD
from runtime.agents._agent import BUILTIN_AGENTS as BUILTIN_AGENTS
from runtime.agents._agent import DEFAULT_AGENT as DEFAULT_AGENT
from runtime.agents._agent import EXPLORE as EXPLORE
from runtime.agents._agent import GENERAL as GENERAL
from runtime.agents._agent import PLAN as PLAN
from runtime.agents._agent import PLAN_RULES as PLAN_RULES
from runtime.agents._agent import AgentInfo as AgentInfo
from runtime.agents._agent import AgentMode as AgentMode
from runtime.agents._agent import compose_rules as compose_rules
from runtime.agents._agent import resolve_agent as resolve_agent
from runtime.agents._commands import INIT as INIT
from runtime.agents._commands import INIT_PROMPT as INIT_PROMPT
from runtime.agents._commands import CommandInfo as CommandInfo
from runtime.agents._commands import CommandLoad as CommandLoad
from runtime.agents._commands import command_folders as command_folders
from runtime.agents._commands import command_hints as command_hints
from runtime.agents._commands import expand_arguments as expand_arguments
from runtime.agents._commands import file_mentions as file_mentions
from runtime.agents._commands import load_commands as load_commands
from runtime.agents._commands import replace_shell as replace_shell
from runtime.agents._commands import shell_spans as shell_spans
from runtime.agents._frontmatter import parse_front_matter as parse_front_matter
from runtime.agents._loader import AgentLoad as AgentLoad
from runtime.agents._loader import agent_from_config as agent_from_config
from runtime.agents._loader import load_agents as load_agents
from runtime.agents._permissions import PermissionAction as PermissionAction
from runtime.agents._permissions import PermissionGate as PermissionGate
from runtime.agents._permissions import PermissionReply as PermissionReply
from runtime.agents._permissions import PermissionRequest as PermissionRequest
from runtime.agents._permissions import PermissionRule as PermissionRule
from runtime.agents._permissions import SavedApprovals as SavedApprovals
from runtime.agents._permissions import decide as decide
from runtime.agents._permissions import evaluate as evaluate
from runtime.agents._permissions import evaluate_resource as evaluate_resource
from runtime.agents._permissions import is_wholly_denied as is_wholly_denied
from runtime.agents._permissions import rules_from_config as rules_from_config
from runtime.agents._prompts import CODING_PROMPT as CODING_PROMPT
from runtime.agents._prompts import ModelFamily as ModelFamily
from runtime.agents._prompts import model_family as model_family
from runtime.agents._prompts import system_prompt as system_prompt

__all__ = [
    "AgentInfo",
    "AgentLoad",
    "AgentMode",
    "BASE_RULES",
    "BUILD",
    "BUILTIN_AGENTS",
    "CODING_PROMPT",
    "CommandInfo",
    "CommandLoad",
    "DEFAULT_AGENT",
    "EXPLORE",
    "GENERAL",
    "INIT",
    "INIT_PROMPT",
    "ModelFamily",
    "PLAN",
    "PLAN_RULES",
    "PermissionAction",
    "PermissionGate",
    "PermissionReply",
    "PermissionRequest",
    "PermissionRule",
    "SavedApprovals",
    "agent_from_config",
    "command_folders",
    "command_hints",
    "compose_rules",
    "decide",
    "evaluate",
    "evaluate_resource",
    "expand_arguments",
    "file_mentions",
    "is_wholly_denied",
    "load_agents",
    "load_commands",
    "model_family",
    "parse_front_matter",
    "replace_shell",
    "resolve_agent",
    "rules_from_config",
    "shell_spans",
    "system_prompt",
]
