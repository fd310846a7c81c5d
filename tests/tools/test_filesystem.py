import base64
import os

import pytest

from runtime.agents import BUILD
from runtime.llm import FilePart, TextPart
from runtime.tools import (
    ToolContext,
    ToolEnvironment,
    ToolFailure,
    ToolSuccess,
    glob_regex,
    location_registry,
    write_managed_output,
)


def _ctx(tmp_path) -> ToolContext:
    return ToolContext(
        session_id="ses_1",
        agent="build",
        assistant_message_id="msg_1",
        tool_call_id="call_1",
        directory=str(tmp_path / "loc"),
    )


@pytest.fixture
def loc(tmp_path):
    root = tmp_path / "loc"
    (root / "src" / "pkg").mkdir(parents=True)
    (root / "src" / "a.py").write_text("import os\nprint('a')\n")
    (root / "src" / "pkg" / "b.py").write_text("def b():\n    return 'needle'\n")
    (root / "notes.md").write_text("needle in notes\n")
    (root / "build").mkdir()
    (root / "build" / "out.py").write_text("needle built\n")
    (root / ".gitignore").write_text("build/\n*.log\n")
    (root / "debug.log").write_text("needle logged\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("needle secret\n")
    os.symlink(outside, root / "escape")
    os.symlink(outside / "secret.txt", root / "secret-link.txt")
    return root


def _registry(tmp_path):
    env = ToolEnvironment(directory=str(tmp_path / "loc"), data_dir=str(tmp_path / "data"))
    return location_registry(env), env


async def _call(tmp_path, name, args):
    registry, _ = _registry(tmp_path)
    return await registry.settle(name, args, _ctx(tmp_path), agent=BUILD)


def _text(result) -> str:
    assert isinstance(result, ToolSuccess), result
    return "".join(p.text for p in result.content if isinstance(p, TextPart))


ESCAPES = [
    ("read", lambda p: {"filePath": p}),
    ("write", lambda p: {"filePath": p, "content": "x"}),
    ("edit", lambda p: {"filePath": p, "oldString": "needle", "newString": "pin"}),
    (
        "apply_patch",
        lambda p: {"patchText": f"*** Begin Patch\n*** Add File: {p}\n+x\n*** End Patch"},
    ),
    ("glob", lambda p: {"pattern": "*", "path": p}),
    ("grep", lambda p: {"pattern": "needle", "path": p}),
]


@pytest.mark.parametrize(("tool", "args"), ESCAPES, ids=[t for t, _ in ESCAPES])
@pytest.mark.parametrize("kind", ["absolute", "dotdot", "symlink"])
async def test_every_filesystem_tool_refuses_escapes(tmp_path, loc, tool, args, kind):
    outside = tmp_path / "outside"
    is_dir_tool = tool in ("glob", "grep")
    path = {
        "absolute": str(outside if is_dir_tool else outside / "secret.txt"),
        "dotdot": "../outside" if is_dir_tool else "../outside/secret.txt",
        "symlink": "escape" if is_dir_tool else "escape/secret.txt",
    }[kind]
    result = await _call(tmp_path, tool, args(path))
    assert isinstance(result, ToolFailure), result
    assert "Path escapes the Location" in result.error or "Absolute path refused" in result.error
    assert (outside / "secret.txt").read_text() == "needle secret\n"
    assert sorted(os.listdir(outside)) == ["secret.txt"]


async def test_glob_and_grep_refuse_patterns_leaving_the_directory(tmp_path, loc):
    escaped = await _call(tmp_path, "glob", {"pattern": "../outside/*"})
    included = await _call(tmp_path, "grep", {"pattern": "needle", "include": "/etc/*"})
    assert isinstance(escaped, ToolFailure) and "leaves the search directory" in escaped.error
    assert isinstance(included, ToolFailure)


async def test_managed_output_is_readable_and_searchable_by_absolute_path(tmp_path, loc):
    _, env = _registry(tmp_path)
    path = write_managed_output(env.tool_output_dir, "tool_0001", "line one\nneedle two\n")
    read = await _call(tmp_path, "read", {"filePath": path})
    grep = await _call(tmp_path, "grep", {"pattern": "needle", "path": env.tool_output_dir})
    assert "1: line one\n2: needle two" in _text(read)
    assert _text(grep) == f"{path}:2: needle two"
    written = await _call(tmp_path, "write", {"filePath": path, "content": "no"})
    assert isinstance(written, ToolFailure) and "Absolute path refused" in written.error


async def test_walks_skip_symlinks_leading_outside(tmp_path, loc):
    found = _text(await _call(tmp_path, "grep", {"pattern": "needle"}))
    assert "secret" not in found
    assert "secret-link" not in _text(await _call(tmp_path, "glob", {"pattern": "*.txt"}))


async def test_read_pages_text_by_lines(tmp_path, loc):
    (loc / "long.txt").write_text("".join(f"row {i}\n" for i in range(1, 11)) + "x" * 2500)
    first = _text(await _call(tmp_path, "read", {"filePath": "long.txt", "limit": 4}))
    assert first.startswith("1: row 1\n2: row 2\n3: row 3\n4: row 4\n\n")
    assert "Use offset=5 to continue" in first
    last = await _call(tmp_path, "read", {"filePath": "long.txt", "offset": 10})
    assert _text(last).startswith("10: row 10\n11: " + "x" * 2000 + "... (line truncated to 2000")
    assert last.structured["next_offset"] is None and last.structured["total"] == 11
    past = await _call(tmp_path, "read", {"filePath": "long.txt", "offset": 50})
    assert isinstance(past, ToolFailure) and "past the end" in past.error


async def test_read_lists_directories_first_alphabetically(tmp_path, loc):
    result = await _call(tmp_path, "read", {"filePath": "src", "limit": 2})
    assert result.structured["entries"] == ["pkg/", "a.py"]
    (loc / "src" / "Z.txt").write_text("")
    (loc / "src" / "aa").mkdir()
    page = await _call(tmp_path, "read", {"filePath": "src", "offset": 2, "limit": 2})
    assert page.structured["entries"] == ["pkg/", "Z.txt"]
    assert page.structured["next_offset"] == 4


async def test_read_returns_binary_as_base64_file_part(tmp_path, loc):
    payload = b"\x89PNG\r\n\x1a\n\x00\x00binary"
    (loc / "pic.png").write_bytes(payload)
    result = await _call(tmp_path, "read", {"filePath": "pic.png"})
    [part] = result.content
    assert isinstance(part, FilePart) and part.mime == "image/png"
    assert base64.b64decode(part.url.split(",", 1)[1]) == payload


async def test_write_creates_parents_and_overwrites(tmp_path, loc):
    created = await _call(tmp_path, "write", {"filePath": "new/dir/f.txt", "content": "héllo\n"})
    assert created.structured == {"path": "new/dir/f.txt", "bytes": 7, "created": True}
    over = await _call(tmp_path, "write", {"filePath": "new/dir/f.txt", "content": "bye\n"})
    assert (loc / "new" / "dir" / "f.txt").read_text() == "bye\n"
    assert over.structured == {
        "path": "new/dir/f.txt", "bytes": 4, "created": False,
        "diff": "--- a/new/dir/f.txt\n+++ b/new/dir/f.txt\n@@ -1 +1 @@\n-héllo\n+bye\n",
    }  # fmt: skip


async def test_the_file_tools_take_opencodes_input_names(tmp_path, loc):
    registry, _ = _registry(tmp_path)
    names = {
        tool: set(registry.lookup(tool).schema["properties"])  # type: ignore[union-attr]
        for tool in ("read", "write", "edit", "apply_patch")
    }
    assert names == {
        "read": {"filePath", "offset", "limit"},
        "write": {"filePath", "content"},
        "edit": {"filePath", "oldString", "newString", "replaceAll"},
        "apply_patch": {"patchText"},
    }
    page = await _call(tmp_path, "read", {"filePath": "notes.md", "offset": 1, "limit": 1})
    assert _text(page).startswith("1: needle in notes")
    old = await _call(tmp_path, "edit", {"path": "notes.md", "old_string": "a", "new_string": "b"})
    assert isinstance(old, ToolFailure)
    assert old.error == "Invalid tool input for edit: Object missing required field `filePath`"


async def test_edit_result_holds_the_diff_of_its_change(tmp_path, loc):
    (loc / "d.txt").write_text("one\ntwo\nthree\n")
    edit = {"filePath": "d.txt", "oldString": "two", "newString": "2"}
    result = await _call(tmp_path, "edit", edit)
    assert result.structured == {
        "path": "d.txt", "replacements": 1,
        "diff": "--- a/d.txt\n+++ b/d.txt\n@@ -1,3 +1,3 @@\n one\n-two\n+2\n three\n",
    }  # fmt: skip
    (loc / "big.txt").write_text("x\n" * 20_000)  # a diff over diff_max_bytes is left out
    everything = {"filePath": "big.txt", "oldString": "x", "newString": "y", "replaceAll": True}
    assert "diff" not in (await _call(tmp_path, "edit", everything)).structured


async def test_edit_requires_a_unique_match_unless_replace_all(tmp_path, loc):
    (loc / "e.txt").write_text("one two one\n")
    twice = await _call(
        tmp_path, "edit", {"filePath": "e.txt", "oldString": "one", "newString": "1"}
    )
    assert isinstance(twice, ToolFailure) and "occurs 2 times" in twice.error
    missing = await _call(
        tmp_path, "edit", {"filePath": "e.txt", "oldString": "three", "newString": "3"}
    )
    assert isinstance(missing, ToolFailure) and "not found" in missing.error
    assert (loc / "e.txt").read_text() == "one two one\n"
    await _call(tmp_path, "edit", {"filePath": "e.txt", "oldString": "two", "newString": "2"})
    everything = {"filePath": "e.txt", "oldString": "one", "newString": "1", "replaceAll": True}
    result = await _call(tmp_path, "edit", everything)
    assert result.structured["replacements"] == 2
    assert (loc / "e.txt").read_text() == "1 2 1\n"


async def test_glob_matches_at_any_depth_and_honours_gitignore(tmp_path, loc):
    result = await _call(tmp_path, "glob", {"pattern": "**/*.py"})
    assert result.structured["matches"] == ["src/a.py", "src/pkg/b.py"]
    scoped = await _call(tmp_path, "glob", {"pattern": "*.py", "path": "src/pkg"})
    assert scoped.structured["matches"] == ["src/pkg/b.py"]


async def test_glob_and_grep_take_brace_alternatives(tmp_path, loc):
    (loc / "src" / "c.ts").write_text("needle typed\n")
    (loc / "docs").mkdir()
    (loc / "docs" / "d.md").write_text("needle documented\n")
    either = await _call(tmp_path, "glob", {"pattern": "**/*.{py,md}"})
    assert either.structured["matches"] == ["notes.md", "docs/d.md", "src/a.py", "src/pkg/b.py"]
    folders = await _call(tmp_path, "glob", {"pattern": "{docs,src/pkg}/*"})
    assert folders.structured["matches"] == ["docs/d.md", "src/pkg/b.py"]
    nested = await _call(tmp_path, "glob", {"pattern": "src/{*.{ts,nope},pkg/b.py}"})
    assert nested.structured["matches"] == ["src/c.ts", "src/pkg/b.py"]
    included = await _call(tmp_path, "grep", {"pattern": "needle", "include": "*.{ts,md}"})
    assert included.structured["matches"] == [
        "notes.md:1: needle in notes",
        "docs/d.md:1: needle documented",
        "src/c.ts:1: needle typed",
    ]


async def test_grep_reports_matching_lines_and_honours_gitignore(tmp_path, loc):
    result = await _call(tmp_path, "grep", {"pattern": r"need\w+"})
    assert result.structured["matches"] == [
        "notes.md:1: needle in notes",
        "src/pkg/b.py:2:     return 'needle'",
    ]
    only_py = await _call(tmp_path, "grep", {"pattern": "needle", "include": "*.py"})
    assert only_py.structured["matches"] == ["src/pkg/b.py:2:     return 'needle'"]
    bad = await _call(tmp_path, "grep", {"pattern": "("})
    assert isinstance(bad, ToolFailure) and "Invalid regular expression" in bad.error


def test_glob_regex():
    assert glob_regex("*.py").match("a/b/c.py")
    assert glob_regex("src/*.py").match("src/a.py")
    assert not glob_regex("src/*.py").match("src/pkg/b.py")
    assert glob_regex("src/**/*.py").match("src/a.py")
    assert glob_regex("[!a]?.txt").match("bc.txt")
    assert not glob_regex("[!a]?.txt").match("ac.txt")
    assert glob_regex("a{b,c{d,e}}f").match("acef")
    assert not glob_regex("a{b,c{d,e}}f").match("acf")
    assert glob_regex("[{,]x").match("{x") and glob_regex("[{,]x").match(",x")
    for literal in ("{a", "a}", "a,b", "{a,b"):  # unpaired braces and bare commas are literal
        assert glob_regex(literal).match(literal)
