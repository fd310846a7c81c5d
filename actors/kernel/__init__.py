"""The actor kernel: actors, mailboxes, supervision, the directory and the event hub.

It knows nothing of sessions: an actor is a trio task with a bounded mailbox, supervised
one-for-one under an intensity limit; the hub fans committed events and live deltas out.
"""

from actors.kernel._actor import Actor as Actor
from actors.kernel._actor import ActorState as ActorState
from actors.kernel._actor import ActorStatistics as ActorStatistics
from actors.kernel._actor import call as call
from actors.kernel._actor import current_time as current_time
from actors.kernel._actor import held as held
from actors.kernel._directory import ActorDirectory as ActorDirectory
from actors.kernel._directory import ActorTreeNode as ActorTreeNode
from actors.kernel._errors import ActorCrashed as ActorCrashed
from actors.kernel._errors import ActorError as ActorError
from actors.kernel._errors import ActorNotFound as ActorNotFound
from actors.kernel._errors import ActorStopped as ActorStopped
from actors.kernel._errors import DuplicateActor as DuplicateActor
from actors.kernel._errors import Escalation as Escalation
from actors.kernel._events import OVERFLOWED as OVERFLOWED
from actors.kernel._events import EventHub as EventHub
from actors.kernel._events import Notice as Notice
from actors.kernel._events import Subscription as Subscription
from actors.kernel._mailbox import Mailbox as Mailbox
from actors.kernel._mailbox import MailboxStatistics as MailboxStatistics
from actors.kernel._mailbox import Reply as Reply
from actors.kernel._mailbox import open_mailbox as open_mailbox
from actors.kernel._supervisor import DEFAULT_POLICY as DEFAULT_POLICY
from actors.kernel._supervisor import Supervisor as Supervisor
from actors.kernel._supervisor import SupervisorPolicy as SupervisorPolicy
from actors.kernel._supervisor import run_root as run_root

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
    "DEFAULT_POLICY",
    "DuplicateActor",
    "Escalation",
    "EventHub",
    "Mailbox",
    "MailboxStatistics",
    "Notice",
    "OVERFLOWED",
    "Reply",
    "Subscription",
    "Supervisor",
    "SupervisorPolicy",
    "call",
    "current_time",
    "held",
    "open_mailbox",
    "run_root",
]
