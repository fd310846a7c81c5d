"""The runtime's session API as embedding programs call it: ``rt.sessions`` and ``rt.tools``,
commands, forks, the user's shell commands, and the pages sessions and events are read in.
"""

from actors.api._export import DEFAULT_MAX_EXPORT_EVENTS as DEFAULT_MAX_EXPORT_EVENTS
from actors.api._export import export_events as export_events
from actors.api._export import import_events as import_events
from actors.api._fork import fork_events as fork_events
from actors.api._fork import fork_session as fork_session
from actors.api._fork import fork_title as fork_title
from actors.api._mcp_host import McpSessionHost as McpSessionHost
from actors.api._pages import Page as Page
from actors.api._pages import SessionEvent as SessionEvent
from actors.api._projects import PROJECT_KIND as PROJECT_KIND
from actors.api._projects import ProjectInfo as ProjectInfo
from actors.api._projects import Projects as Projects
from actors.api._session_tools import DEFAULT_MAX_TASKS as DEFAULT_MAX_TASKS
from actors.api._session_tools import SessionTools as SessionTools
from actors.api._sessions import Sessions as Sessions
from actors.api._shell import USER_SHELL_TEXT as USER_SHELL_TEXT
from actors.api._shell import run_user_shell as run_user_shell

__all__ = [
    "DEFAULT_MAX_EXPORT_EVENTS",
    "DEFAULT_MAX_TASKS",
    "McpSessionHost",
    "PROJECT_KIND",
    "Page",
    "ProjectInfo",
    "Projects",
    "SessionEvent",
    "SessionTools",
    "Sessions",
    "USER_SHELL_TEXT",
    "export_events",
    "fork_events",
    "fork_session",
    "fork_title",
    "import_events",
    "run_user_shell",
]
