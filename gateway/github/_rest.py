"""The few GitHub REST calls ``kittiwake github run`` makes, over httpx, at the API base
``GITHUB_API_URL`` names (``https://api.github.com``, or a GitHub Enterprise server's)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, Final

import httpx

from gateway.github._event import Trigger

__all__ = ["DEFAULT_API_URL", "GitHub", "GitHubError", "open_github"]

DEFAULT_API_URL: Final = "https://api.github.com"
_WRITERS: Final = ("admin", "maintain", "write")


class GitHubError(Exception):
    """A GitHub call that failed: the message names the call and GitHub's answer."""


class GitHub:
    """The REST calls on one repository (``owner/name``) through *client*."""

    def __init__(self, client: httpx.AsyncClient, repository: str) -> None:
        self.client = client
        self.repository = repository

    async def _call(self, method: str, path: str, body: Any = None) -> Any:
        """GitHub's JSON answer to *method* *path*. Raises ``GitHubError`` for an error
        answer or an unreachable server (the token is never in the message)."""
        try:
            response = await self.client.request(method, path, json=body)
        except httpx.HTTPError as exc:
            raise GitHubError(f"{method} {path}: cannot reach GitHub: {exc}") from None
        if response.status_code >= 400:
            try:
                message = response.json().get("message", "")
            except ValueError:
                message = response.text[:200]
            raise GitHubError(f"{method} {path}: HTTP {response.status_code}: {message}")
        return response.json() if response.content else None

    async def can_write(self, login: str) -> bool:
        """Whether *login* has write permission (write, maintain or admin) on the
        repository; False for one GitHub does not know as a collaborator (404)."""
        try:
            answer = await self._call(
                "GET", f"/repos/{self.repository}/collaborators/{login}/permission"
            )
        except GitHubError as exc:
            if ": HTTP 404:" in str(exc):
                return False
            raise
        return isinstance(answer, dict) and answer.get("permission") in _WRITERS

    async def react(self, trigger: Trigger, content: str = "eyes") -> None:
        """Add the reaction *content* to the comment that asked (or the issue)."""
        if trigger.comment_id is not None:
            kind = "pulls" if trigger.review_comment else "issues"
            path = f"/repos/{self.repository}/{kind}/comments/{trigger.comment_id}/reactions"
        elif trigger.number is not None:
            path = f"/repos/{self.repository}/issues/{trigger.number}/reactions"
        else:
            return
        await self._call("POST", path, {"content": content})

    async def pull(self, number: int) -> dict[str, Any]:
        """The pull request *number*."""
        answer: dict[str, Any] = await self._call("GET", f"/repos/{self.repository}/pulls/{number}")
        return answer

    async def open_pull(self, *, head: str, base: str, title: str, body: str) -> dict[str, Any]:
        """Open a pull request of *head* into *base*; GitHub's answer (``number``,
        ``html_url``)."""
        answer: dict[str, Any] = await self._call(
            "POST", f"/repos/{self.repository}/pulls",
            {"head": head, "base": base, "title": title, "body": body},
        )  # fmt: skip
        return answer

    async def reply(self, trigger: Trigger, body: str) -> None:
        """Comment *body* where *trigger* asked: a reply in a review comment's thread, else
        a comment on the issue or pull request; nothing for an event without one."""
        if trigger.number is None:
            return
        if trigger.review_comment and trigger.comment_id is not None:
            path = f"/repos/{self.repository}/pulls/{trigger.number}/comments/{trigger.comment_id}/replies"
        else:
            path = f"/repos/{self.repository}/issues/{trigger.number}/comments"
        await self._call("POST", path, {"body": body})


@asynccontextmanager
async def open_github(
    base_url: str, token: str, repository: str, *, seconds: float = 30.0
) -> AsyncIterator[GitHub]:
    """A ``GitHub`` of *repository* at *base_url* authenticated by *token*, for the block."""
    headers = {
        "Authorization": f"Bearer {token}",
        "Accept": "application/vnd.github+json",
        "X-GitHub-Api-Version": "2022-11-28",
        "User-Agent": "kittiwake",
    }
    async with httpx.AsyncClient(
        base_url=base_url.rstrip("/"), headers=headers, timeout=seconds
    ) as client:
        yield GitHub(client, repository)
