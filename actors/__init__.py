"""Kittiwake's trio actor kernel and actors.

Public names are re-exported here one per line; ``__all__`` stays sorted.
"""

from actors._errors import ActorCrashed as ActorCrashed
from actors._errors import ActorError as ActorError
from actors._errors import ActorNotFound as ActorNotFound
from actors._errors import ActorStopped as ActorStopped
from actors._errors import DuplicateActor as DuplicateActor
from actors._errors import Escalation as Escalation
from actors._mailbox import Mailbox as Mailbox
from actors._mailbox import MailboxStatistics as MailboxStatistics
from actors._mailbox import Reply as Reply
from actors._mailbox import open_mailbox as open_mailbox

__all__ = [
    "ActorCrashed",
    "ActorError",
    "ActorNotFound",
    "ActorStopped",
    "DuplicateActor",
    "Escalation",
    "Mailbox",
    "MailboxStatistics",
    "Reply",
    "open_mailbox",
]
