"""What ``kittiwake github run`` reads from an event: the mention, the prompt and its
context, the configuration that denies the question tool."""

from __future__ import annotations

import json

import pytest

from gateway.cli._github import deny_question
from gateway.github import DEFAULT_MENTIONS
from gateway.github._event import EventError, Trigger, mentioned, prompt_of, read_trigger


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("/kittiwake fix it", "/kittiwake"),
        ("please /KW look", "/kw"),
        ("see /kwx", None),
        ("a/kw b", None),
        ("kittiwake", None),
        ("(/kw)", "/kw"),
    ],
)
def test_mentioned_as_a_word(text: str, found: str | None) -> None:
    assert mentioned(text, DEFAULT_MENTIONS) == found


def test_prompt_drops_the_mention_and_adds_the_context() -> None:
    trigger = Trigger(
        event="pull_request_review_comment", repository="o/r", default_branch="main",
        number=3, pull_request=True, comment_id=9, review_comment=True, title="T",
        body="B", text="/kw rename this", path="a.py", line=12, diff_hunk="@@ -1 +1 @@",
    )  # fmt: skip
    prompt = prompt_of(trigger, DEFAULT_MENTIONS, None)
    assert prompt.startswith("rename this\n\nContext: pull request #3 of o/r: T\n\nB")
    assert "The comment is on a.py:12." in prompt and "```diff\n@@ -1 +1 @@\n```" in prompt
    assert prompt_of(trigger, DEFAULT_MENTIONS, "review it").startswith("review it\n")


def test_unhandled_or_broken_events_say_why(tmp_path) -> None:
    env = {"GITHUB_EVENT_NAME": "push", "GITHUB_EVENT_PATH": str(tmp_path / "e.json")}
    with pytest.raises(EventError, match="push is not one"):
        read_trigger(env)
    env["GITHUB_EVENT_NAME"] = "issue_comment"
    with pytest.raises(EventError, match="cannot read the event"):
        read_trigger(env)
    (tmp_path / "e.json").write_text(json.dumps({"repository": {"full_name": "o/r"}}))
    with pytest.raises(EventError, match="the issue_comment event lacks 'issue'"):
        read_trigger(env)
    with pytest.raises(EventError, match="GITHUB_EVENT_NAME and GITHUB_EVENT_PATH"):
        read_trigger({})


def test_deny_question_keeps_the_configuration_it_is_added_to() -> None:
    env = {"KITTIWAKE_CONFIG_CONTENT": json.dumps({"model": "a/b", "permission": {"bash": "ask"}})}
    deny_question(env)
    assert json.loads(env["KITTIWAKE_CONFIG_CONTENT"]) == {
        "model": "a/b", "permission": {"bash": "ask", "question": "deny"},
    }  # fmt: skip
    empty: dict[str, str] = {}
    deny_question(empty)
    assert json.loads(empty["KITTIWAKE_CONFIG_CONTENT"]) == {"permission": {"question": "deny"}}
