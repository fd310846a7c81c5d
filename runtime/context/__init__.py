"""System Context: Context Sources, the System Context Registry, and built-in sources.

Loading is async; deciding what to admit at a Safe Provider-Turn Boundary is pure.
"""

from runtime.context._builtins import DATE_KEY as DATE_KEY
from runtime.context._builtins import ENVIRONMENT_KEY as ENVIRONMENT_KEY
from runtime.context._builtins import SKILL_GUIDANCE_KEY as SKILL_GUIDANCE_KEY
from runtime.context._builtins import EnvironmentFacts as EnvironmentFacts
from runtime.context._builtins import SkillSummary as SkillSummary
from runtime.context._builtins import date_source as date_source
from runtime.context._builtins import environment_source as environment_source
from runtime.context._builtins import find_git_repository as find_git_repository
from runtime.context._builtins import render_date as render_date
from runtime.context._builtins import render_environment as render_environment
from runtime.context._builtins import render_skill_guidance as render_skill_guidance
from runtime.context._builtins import skill_guidance_source as skill_guidance_source
from runtime.context._builtins import to_date_string as to_date_string
from runtime.context._core import BUILTINS_CONTRIBUTION as BUILTINS_CONTRIBUTION
from runtime.context._core import INSTRUCTIONS_CONTRIBUTION as INSTRUCTIONS_CONTRIBUTION
from runtime.context._core import contribute_core_context as contribute_core_context
from runtime.context._errors import DuplicateContextKeyError as DuplicateContextKeyError
from runtime.context._errors import EmptyBaselineError as EmptyBaselineError
from runtime.context._errors import EmptyRenderingError as EmptyRenderingError
from runtime.context._errors import InvalidContextKeyError as InvalidContextKeyError
from runtime.context._errors import SnapshotDecodeError as SnapshotDecodeError
from runtime.context._errors import SystemContextError as SystemContextError
from runtime.context._instructions import DISABLE_PROJECT_CONFIG_ENV as DISABLE_PROJECT_CONFIG_ENV
from runtime.context._instructions import INSTRUCTIONS_FILENAME as INSTRUCTIONS_FILENAME
from runtime.context._instructions import INSTRUCTIONS_KEY as INSTRUCTIONS_KEY
from runtime.context._instructions import RACY_NS as RACY_NS
from runtime.context._instructions import InstructionFile as InstructionFile
from runtime.context._instructions import InstructionsWatch as InstructionsWatch
from runtime.context._instructions import discover_instructions as discover_instructions
from runtime.context._instructions import instructions_producer as instructions_producer
from runtime.context._instructions import instructions_source as instructions_source
from runtime.context._instructions import load_instructions as load_instructions
from runtime.context._instructions import path_stamp as path_stamp
from runtime.context._instructions import render_instructions as render_instructions
from runtime.context._registry import ContributionHandle as ContributionHandle
from runtime.context._registry import Produced as Produced
from runtime.context._registry import Producer as Producer
from runtime.context._registry import RegistryStatistics as RegistryStatistics
from runtime.context._registry import SystemContextRegistry as SystemContextRegistry
from runtime.context._snapshot import EMPTY_SNAPSHOT as EMPTY_SNAPSHOT
from runtime.context._snapshot import Snapshot as Snapshot
from runtime.context._snapshot import SnapshotEntry as SnapshotEntry
from runtime.context._snapshot import decode_snapshot as decode_snapshot
from runtime.context._snapshot import encode_snapshot as encode_snapshot
from runtime.context._system import CONTEXT_KEY_PATTERN as CONTEXT_KEY_PATTERN
from runtime.context._system import UNAVAILABLE as UNAVAILABLE
from runtime.context._system import ContextSource as ContextSource
from runtime.context._system import InitializationBlocked as InitializationBlocked
from runtime.context._system import InitializationOutcome as InitializationOutcome
from runtime.context._system import Initialized as Initialized
from runtime.context._system import ObservedContext as ObservedContext
from runtime.context._system import ReconcileOutcome as ReconcileOutcome
from runtime.context._system import ReplacementBlocked as ReplacementBlocked
from runtime.context._system import ReplacementReady as ReplacementReady
from runtime.context._system import ReplaceOutcome as ReplaceOutcome
from runtime.context._system import SystemContext as SystemContext
from runtime.context._system import Unavailable as Unavailable
from runtime.context._system import Unchanged as Unchanged
from runtime.context._system import Updated as Updated
from runtime.context._system import validate_context_key as validate_context_key

__all__ = [
    "BUILTINS_CONTRIBUTION",
    "CONTEXT_KEY_PATTERN",
    "ContextSource",
    "ContributionHandle",
    "DATE_KEY",
    "DISABLE_PROJECT_CONFIG_ENV",
    "DuplicateContextKeyError",
    "EMPTY_SNAPSHOT",
    "ENVIRONMENT_KEY",
    "EmptyBaselineError",
    "EmptyRenderingError",
    "EnvironmentFacts",
    "INSTRUCTIONS_CONTRIBUTION",
    "INSTRUCTIONS_FILENAME",
    "INSTRUCTIONS_KEY",
    "InitializationBlocked",
    "InitializationOutcome",
    "Initialized",
    "InstructionFile",
    "InstructionsWatch",
    "InvalidContextKeyError",
    "ObservedContext",
    "Produced",
    "Producer",
    "RACY_NS",
    "ReconcileOutcome",
    "RegistryStatistics",
    "ReplaceOutcome",
    "ReplacementBlocked",
    "ReplacementReady",
    "SKILL_GUIDANCE_KEY",
    "SkillSummary",
    "Snapshot",
    "SnapshotDecodeError",
    "SnapshotEntry",
    "SystemContext",
    "SystemContextError",
    "SystemContextRegistry",
    "UNAVAILABLE",
    "Unavailable",
    "Unchanged",
    "Updated",
    "contribute_core_context",
    "date_source",
    "decode_snapshot",
    "discover_instructions",
    "encode_snapshot",
    "environment_source",
    "find_git_repository",
    "instructions_producer",
    "instructions_source",
    "load_instructions",
    "path_stamp",
    "render_date",
    "render_environment",
    "render_instructions",
    "render_skill_guidance",
    "skill_guidance_source",
    "to_date_string",
    "validate_context_key",
]
