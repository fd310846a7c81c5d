"""Configuration: ``kittiwake.json`` files and variables, merged as OpenCode merges them.

``load_config(directory, env)`` reads every source of a Location's directory and returns
a ``LoadedConfig``: the merged configuration (typed and as JSON data), the source of each
key, and diagnostics for keys that were ignored. ``ConfigError`` names file, line, column
and key path. Parsing, substitution, validation and merging are pure functions
(``parse_document``, ``merge_documents``); ``ConfigWatch`` re-reads only after a change.
``write_config_value`` sets one key of a file in place, keeping its comments.
"""

from runtime.config._core import ConfigDiagnostic as ConfigDiagnostic
from runtime.config._core import Document as Document
from runtime.config._core import merge_documents as merge_documents
from runtime.config._core import parse_document as parse_document
from runtime.config._core import substitute as substitute
from runtime.config._core import validate_document as validate_document
from runtime.config._edit import set_jsonc_value as set_jsonc_value
from runtime.config._edit import write_config_value as write_config_value
from runtime.config._instructions import CONFIG_INSTRUCTIONS_KEY as CONFIG_INSTRUCTIONS_KEY
from runtime.config._instructions import config_instructions_source as config_instructions_source
from runtime.config._instructions import find_instruction_files as find_instruction_files
from runtime.config._jsonc import ConfigError as ConfigError
from runtime.config._jsonc import KeyPath as KeyPath
from runtime.config._jsonc import parse_jsonc as parse_jsonc
from runtime.config._jsonc import render_path as render_path
from runtime.config._load import CONFIG_CONTENT_ENV as CONFIG_CONTENT_ENV
from runtime.config._load import CONFIG_ENV as CONFIG_ENV
from runtime.config._load import ConfigWatch as ConfigWatch
from runtime.config._load import LoadedConfig as LoadedConfig
from runtime.config._load import config_candidates as config_candidates
from runtime.config._load import global_config_dir as global_config_dir
from runtime.config._load import global_config_file as global_config_file
from runtime.config._load import load_config as load_config
from runtime.config._load import load_global_config as load_global_config
from runtime.config._load import project_config_file as project_config_file
from runtime.config._load import worktree_root as worktree_root
from runtime.config._load import write_config_patch as write_config_patch
from runtime.config._schema import AgentConfig as AgentConfig
from runtime.config._schema import Config as Config
from runtime.config._schema import ExperimentalConfig as ExperimentalConfig
from runtime.config._schema import McpOAuthConfig as McpOAuthConfig
from runtime.config._schema import McpServerConfig as McpServerConfig
from runtime.config._schema import ModelConfig as ModelConfig
from runtime.config._schema import PermissionConfig as PermissionConfig
from runtime.config._schema import ProviderConfig as ProviderConfig
from runtime.config._schema import ProviderOptions as ProviderOptions
from runtime.config._schema import ServerConfig as ServerConfig
from runtime.config._schema import SlackConfig as SlackConfig
from runtime.config._schema import TelemetryConfig as TelemetryConfig
from runtime.config._schema import TelemetryOtlpConfig as TelemetryOtlpConfig

__all__ = [
    "AgentConfig",
    "CONFIG_CONTENT_ENV",
    "CONFIG_ENV",
    "CONFIG_INSTRUCTIONS_KEY",
    "Config",
    "ConfigDiagnostic",
    "ConfigError",
    "ConfigWatch",
    "Document",
    "ExperimentalConfig",
    "KeyPath",
    "LoadedConfig",
    "McpOAuthConfig",
    "McpServerConfig",
    "ModelConfig",
    "PermissionConfig",
    "ProviderConfig",
    "ProviderOptions",
    "ServerConfig",
    "SlackConfig",
    "TelemetryConfig",
    "TelemetryOtlpConfig",
    "config_candidates",
    "config_instructions_source",
    "find_instruction_files",
    "global_config_dir",
    "global_config_file",
    "load_config",
    "load_global_config",
    "merge_documents",
    "parse_document",
    "parse_jsonc",
    "project_config_file",
    "render_path",
    "set_jsonc_value",
    "substitute",
    "validate_document",
    "worktree_root",
    "write_config_patch",
    "write_config_value",
]
