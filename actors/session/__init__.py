"""Session execution: the router from session id to SessionActor, the drain and its provider
turns, recovery, revert, compaction, context epochs, permissions and questions, titles.
"""

from actors.session._config import Configuration as Configuration
from actors.session._config import ProviderClients as ProviderClients
from actors.session._config import session_model as session_model
from actors.session._context import ContextFactory as ContextFactory
from actors.session._context import default_context as default_context
from actors.session._execution import LocationLoads as LocationLoads
from actors.session._execution import SessionExecution as SessionExecution
from actors.session._execution import ToolsFactory as ToolsFactory
from actors.session._location import check_directory as check_directory
from actors.session._opening import DEFAULT_ADMISSION_TIMEOUT as DEFAULT_ADMISSION_TIMEOUT
from actors.session._opening import admit_and_open as admit_and_open
from actors.session._questions import DEFAULT_QUESTION_EVENTS as DEFAULT_QUESTION_EVENTS
from actors.session._questions import DurableQuestions as DurableQuestions
from actors.session._recovery import recover_until_written as recover_until_written
from actors.session._revert import Reverted as Reverted
from actors.session._revert import Reverts as Reverts
from actors.session._session import DEFAULT_MAX_TURNS as DEFAULT_MAX_TURNS
from actors.session._session import SessionActor as SessionActor
from actors.session._titles import TitleModel as TitleModel
from actors.session._turn import INTERRUPTED_TOOL as INTERRUPTED_TOOL

__all__ = [
    "Configuration",
    "ContextFactory",
    "DEFAULT_ADMISSION_TIMEOUT",
    "DEFAULT_MAX_TURNS",
    "DEFAULT_QUESTION_EVENTS",
    "DurableQuestions",
    "INTERRUPTED_TOOL",
    "LocationLoads",
    "ProviderClients",
    "Reverted",
    "Reverts",
    "SessionActor",
    "SessionExecution",
    "TitleModel",
    "ToolsFactory",
    "admit_and_open",
    "check_directory",
    "default_context",
    "recover_until_written",
    "session_model",
]
