"""Session History, sans-IO: projecting durable events into messages, the view a
provider turn reads, lowering it into an LLM request, and the events crash recovery
writes for a turn a crash cut short."""

from runtime._history import HistoryDelta as HistoryDelta
from runtime._history import HistoryView as HistoryView
from runtime._history import latest_checkpoint as latest_checkpoint
from runtime._history import visible_history as visible_history
from runtime._lowering import PRUNED_RESULT as PRUNED_RESULT
from runtime._lowering import UnansweredToolCallError as UnansweredToolCallError
from runtime._lowering import checkpoint_text as checkpoint_text
from runtime._lowering import lower_history as lower_history
from runtime._lowering import lower_message as lower_message
from runtime._lowering import to_llm_model as to_llm_model
from runtime._projection import ProjectionError as ProjectionError
from runtime._projection import ProjectionState as ProjectionState
from runtime._projection import project as project
from runtime._recovery import cut_short as cut_short
from runtime._recovery import needs_recovery as needs_recovery
from runtime._recovery import recovery_events as recovery_events

__all__ = [
    "HistoryDelta",
    "HistoryView",
    "PRUNED_RESULT",
    "ProjectionError",
    "ProjectionState",
    "UnansweredToolCallError",
    "checkpoint_text",
    "cut_short",
    "latest_checkpoint",
    "lower_history",
    "lower_message",
    "needs_recovery",
    "project",
    "recovery_events",
    "to_llm_model",
    "visible_history",
]
