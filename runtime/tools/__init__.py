"""The Location-scoped Tool Registry, bounded Model Tool Output and built-in tools."""

from runtime.tools._bounding import apply_bounding as apply_bounding
from runtime.tools._bounding import bounding_text as bounding_text
from runtime.tools._bounding import exceeds_limits as exceeds_limits
from runtime.tools._bounding import preview as preview
from runtime.tools._bounding import truncation_marker as truncation_marker
from runtime.tools._managed import cleanup_tool_output as cleanup_tool_output
from runtime.tools._managed import run_tool_output_cleanup as run_tool_output_cleanup
from runtime.tools._managed import write_managed_output as write_managed_output
from runtime.tools._model import ContentPart as ContentPart
from runtime.tools._model import ToolContext as ToolContext
from runtime.tools._model import ToolEnvironment as ToolEnvironment
from runtime.tools._model import ToolError as ToolError
from runtime.tools._model import ToolFailure as ToolFailure
from runtime.tools._model import ToolOutput as ToolOutput
from runtime.tools._model import ToolOutputLimits as ToolOutputLimits
from runtime.tools._model import ToolSettlement as ToolSettlement
from runtime.tools._model import ToolSuccess as ToolSuccess
from runtime.tools._registry import ToolContribution as ToolContribution
from runtime.tools._registry import ToolRegistry as ToolRegistry
from runtime.tools._registry import ToolRegistryStatistics as ToolRegistryStatistics
from runtime.tools._tool import TOOL_NAME_PATTERN as TOOL_NAME_PATTERN
from runtime.tools._tool import Tool as Tool
from runtime.tools._tool import input_schema as input_schema

__all__ = [
    "TOOL_NAME_PATTERN",
    "ContentPart",
    "Tool",
    "ToolContext",
    "ToolContribution",
    "ToolEnvironment",
    "ToolError",
    "ToolFailure",
    "ToolOutput",
    "ToolOutputLimits",
    "ToolRegistry",
    "ToolRegistryStatistics",
    "ToolSettlement",
    "ToolSuccess",
    "apply_bounding",
    "bounding_text",
    "cleanup_tool_output",
    "exceeds_limits",
    "input_schema",
    "preview",
    "run_tool_output_cleanup",
    "truncation_marker",
    "write_managed_output",
]
