"""Agents and permission rules."""

from runtime.agents._agent import BUILD as BUILD
from runtime.agents._agent import BUILTIN_AGENTS as BUILTIN_AGENTS
from runtime.agents._agent import DEFAULT_AGENT as DEFAULT_AGENT
from runtime.agents._agent import PLAN as PLAN
from runtime.agents._agent import AgentInfo as AgentInfo
from runtime.agents._agent import AgentMode as AgentMode
from runtime.agents._agent import resolve_agent as resolve_agent
from runtime.agents._permissions import PermissionAction as PermissionAction
from runtime.agents._permissions import PermissionGate as PermissionGate
from runtime.agents._permissions import PermissionReply as PermissionReply
from runtime.agents._permissions import PermissionRequest as PermissionRequest
from runtime.agents._permissions import PermissionRule as PermissionRule
from runtime.agents._permissions import SavedApprovals as SavedApprovals
from runtime.agents._permissions import evaluate as evaluate
from runtime.agents._permissions import evaluate_resource as evaluate_resource
from runtime.agents._permissions import is_wholly_denied as is_wholly_denied
from runtime.agents._permissions import rules_from_config as rules_from_config

__all__ = [
    "BUILD",
    "BUILTIN_AGENTS",
    "DEFAULT_AGENT",
    "PLAN",
    "AgentInfo",
    "AgentMode",
    "PermissionAction",
    "PermissionGate",
    "PermissionReply",
    "PermissionRequest",
    "PermissionRule",
    "SavedApprovals",
    "evaluate",
    "evaluate_resource",
    "is_wholly_denied",
    "resolve_agent",
    "rules_from_config",
]
