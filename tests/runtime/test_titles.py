"""The pure part of session titles: placeholder, request, clean-up."""

from __future__ import annotations

from msgspec import UNSET
from msgspec.structs import replace

from runtime import Location, llm
from runtime.events import SessionInfo, SessionTime
from runtime.titles import (
    MAX_TITLE_CHARS,
    TITLE_PROMPT,
    TitleLimits,
    clean_title,
    default_title,
    needs_title,
    title_request,
)


def test_clean_title_keeps_one_plain_line():
    assert clean_title('"Fix the login redirect."') == "Fix the login redirect"
    assert clean_title("Title: **Add a cache layer**\n\nBecause...") == "Add a cache layer"
    assert clean_title("<think>the user wants\na title</think>\n# Explain DuckDB WAL") == (
        "Explain DuckDB WAL"
    )
    assert clean_title("  `Réparer le test`  ") == "Réparer le test"
    assert clean_title("\n \n") is None
    assert clean_title('""') is None


def test_clean_title_cuts_long_titles_at_a_word():
    long = "Refactor " + "the very long module name " * 10
    title = clean_title(long)
    assert title is not None and len(title) <= MAX_TITLE_CHARS
    assert title.endswith("\u2026") and not title[:-1].endswith(" ")
    assert long.startswith(title[:-1])


def test_needs_title_only_for_top_level_sessions_with_the_placeholder():
    info = SessionInfo(
        id="ses_0123456789abcdef", project_id="p", location=Location(directory="/w"),
        title=default_title("ses_0123456789abcdef"), time=SessionTime(created=1, updated=1),
    )  # fmt: skip
    assert info.title == "Session 89abcdef"
    assert needs_title(info)
    assert not needs_title(replace(info, title="Mine"))
    assert not needs_title(replace(info, parent_id="ses_parent"))
    assert replace(info, parent_id=UNSET).parent_id is UNSET


def test_title_request_is_bounded_and_tool_less():
    model = llm.ModelRef(provider_id="openai", model_id="gpt-5-nano")
    limits = TitleLimits(max_prompt_chars=10, max_output_tokens=300)
    request = title_request(model, "  0123456789ABCDEF  ", limits)
    assert request.model == model and request.system == [TITLE_PROMPT]
    assert request.tools == [] and request.tool_choice == "none"
    assert request.generation.max_output_tokens == 300
    text = request.messages[0].content[0].text
    assert "0123456789" in text and "A" not in text.split("<message>")[1]
