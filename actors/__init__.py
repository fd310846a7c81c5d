"""Kittiwake's trio actor kernel and actors.

Public names are re-exported here one per line; ``__all__`` stays sorted.
"""

from actors._runtime import Runtime as Runtime
from actors._runtime import open_runtime as open_runtime
from actors.api import USER_SHELL_TEXT as USER_SHELL_TEXT
from actors.api import Page as Page
from actors.api import ProjectInfo as ProjectInfo
from actors.api import Projects as Projects
from actors.api import SessionEvent as SessionEvent
from actors.api import Sessions as Sessions
from actors.api import SessionTools as SessionTools
from actors.api import export_events as export_events
from actors.api import fork_events as fork_events
from actors.api import fork_session as fork_session
from actors.api import fork_title as fork_title
from actors.api import import_events as import_events
from actors.api import run_user_shell as run_user_shell
from actors.cluster import ClusterOptions as ClusterOptions
from actors.kernel import DEFAULT_POLICY as DEFAULT_POLICY
from actors.kernel import OVERFLOWED as OVERFLOWED
from actors.kernel import Actor as Actor
from actors.kernel import ActorCrashed as ActorCrashed
from actors.kernel import ActorDirectory as ActorDirectory
from actors.kernel import ActorError as ActorError
from actors.kernel import ActorNotFound as ActorNotFound
from actors.kernel import ActorState as ActorState
from actors.kernel import ActorStatistics as ActorStatistics
from actors.kernel import ActorStopped as ActorStopped
from actors.kernel import ActorTreeNode as ActorTreeNode
from actors.kernel import DuplicateActor as DuplicateActor
from actors.kernel import Escalation as Escalation
from actors.kernel import EventHub as EventHub
from actors.kernel import Mailbox as Mailbox
from actors.kernel import MailboxStatistics as MailboxStatistics
from actors.kernel import Notice as Notice
from actors.kernel import Reply as Reply
from actors.kernel import Subscription as Subscription
from actors.kernel import Supervisor as Supervisor
from actors.kernel import SupervisorPolicy as SupervisorPolicy
from actors.kernel import call as call
from actors.kernel import current_time as current_time
from actors.kernel import open_mailbox as open_mailbox
from actors.kernel import run_root as run_root
from actors.session import Configuration as Configuration
from actors.session import ProviderClients as ProviderClients
from actors.session import Reverted as Reverted
from actors.session import Reverts as Reverts
from actors.session import SessionActor as SessionActor
from actors.session import SessionExecution as SessionExecution
from actors.store import StorageActor as StorageActor

__all__ = [
    "Actor",
    "ActorCrashed",
    "ActorDirectory",
    "ActorError",
    "ActorNotFound",
    "ActorState",
    "ActorStatistics",
    "ActorStopped",
    "ActorTreeNode",
    "ClusterOptions",
    "Configuration",
    "DEFAULT_POLICY",
    "DuplicateActor",
    "Escalation",
    "EventHub",
    "Mailbox",
    "MailboxStatistics",
    "Notice",
    "OVERFLOWED",
    "Page",
    "ProjectInfo",
    "Projects",
    "ProviderClients",
    "Reply",
    "Reverted",
    "Reverts",
    "Runtime",
    "SessionActor",
    "SessionEvent",
    "SessionExecution",
    "SessionTools",
    "Sessions",
    "StorageActor",
    "Subscription",
    "Supervisor",
    "SupervisorPolicy",
    "USER_SHELL_TEXT",
    "call",
    "current_time",
    "export_events",
    "fork_events",
    "fork_session",
    "fork_title",
    "import_events",
    "open_mailbox",
    "open_runtime",
    "run_root",
    "run_user_shell",
]
