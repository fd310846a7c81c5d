"""Revert and unrevert, sans-IO: which messages a rollback hides and which files get which
content (``runtime.revert._revert``)."""

from runtime.revert._revert import HIDDEN_OPEN as HIDDEN_OPEN
from runtime.revert._revert import FileChange as FileChange
from runtime.revert._revert import MessageNotFoundError as MessageNotFoundError
from runtime.revert._revert import RevertPlan as RevertPlan
from runtime.revert._revert import SessionBusyError as SessionBusyError
from runtime.revert._revert import close_hidden as close_hidden
from runtime.revert._revert import file_changes as file_changes
from runtime.revert._revert import hidden_ranges as hidden_ranges
from runtime.revert._revert import is_hidden as is_hidden
from runtime.revert._revert import open_hidden as open_hidden
from runtime.revert._revert import plan_revert as plan_revert
from runtime.revert._revert import revert_paths as revert_paths
from runtime.revert._revert import unrevert_files as unrevert_files
from runtime.revert._revert import visible_rows as visible_rows

__all__ = [
    "FileChange",
    "HIDDEN_OPEN",
    "MessageNotFoundError",
    "RevertPlan",
    "SessionBusyError",
    "close_hidden",
    "file_changes",
    "hidden_ranges",
    "is_hidden",
    "open_hidden",
    "plan_revert",
    "revert_paths",
    "unrevert_files",
    "visible_rows",
]
