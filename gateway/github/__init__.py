"""``kittiwake github run``: a GitHub Actions event (a mention in an issue or review
comment, an issue, a pull request, a dispatch, a schedule) answered by one session in the
checkout, its changes pushed and a reply posted (docs/github.md). A client of the GitHub
REST API and, through the ``RunSession`` the command hands it, of the runtime's HTTP API.
"""

from gateway.github._event import DEFAULT_MENTIONS as DEFAULT_MENTIONS
from gateway.github._event import EVENTS as EVENTS
from gateway.github._run import TOKEN_VARIABLES as TOKEN_VARIABLES
from gateway.github._run import GitHubOptions as GitHubOptions
from gateway.github._run import Ran as Ran
from gateway.github._run import RunSession as RunSession
from gateway.github._run import SessionFailed as SessionFailed
from gateway.github._run import github_run as github_run

__all__ = [
    "DEFAULT_MENTIONS",
    "EVENTS",
    "GitHubOptions",
    "Ran",
    "RunSession",
    "SessionFailed",
    "TOKEN_VARIABLES",
    "github_run",
]
