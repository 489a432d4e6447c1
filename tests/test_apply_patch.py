"""The apply_patch grammar, its carriers, and replaying Updates with exact line ranges.

Expected ranges are worked out by hand from the file and patch text in each test.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engram.adapters.apply_patch import (
    Chunk,
    PatchError,
    apply_update,
    heredoc_patch,
    parse_patch,
    patch_attempt,
    patch_changes,
    patch_from_argv,
    patch_from_custom,
    patch_from_function,
    patch_from_script,
    seek_sequence,
)

FULL = """*** Begin Patch
*** Add File: docs/new.md
+# Title
+
+body
*** Delete File: old.txt
*** Update File: src/app.py
*** Move to: src/main.py
@@ def greet():
-    print("Hi")
+    print("Hello")
*** End Patch
"""


def ranges(result) -> list[tuple[int, int, int, int]]:  # noqa: ANN001 - UpdateResult
    return [(c.old_start, c.old_end, c.new_start, c.new_end) for c in result.changes]


# ---------------------------------------------------------------- grammar


def test_parse_every_operation() -> None:
    add, delete, update = parse_patch(FULL)
    assert (add.kind, add.path, add.content) == ("add", "docs/new.md", "# Title\n\nbody\n")
    assert (delete.kind, delete.path) == ("delete", "old.txt")
    assert (update.kind, update.path, update.move_to) == ("update", "src/app.py", "src/main.py")
    (chunk,) = update.chunks
    assert chunk.anchors == ("def greet():",)
    assert chunk.lines == (("-", '    print("Hi")'), ("+", '    print("Hello")'))
    assert not chunk.end_of_file


def test_padded_markers_and_missing_final_newline() -> None:
    text = "  *** Begin Patch  \n*** Update File:   a.py  \n@@\n-x\n+y\n   *** End Patch"
    (op,) = parse_patch(text)
    assert op.path == "a.py"
    assert op.chunks[0].old_lines == ["x"] and op.chunks[0].new_lines == ["y"]


def test_heredoc_lines_passed_as_the_argument_are_tolerated() -> None:
    text = "<<'EOF'\n*** Begin Patch\n*** Delete File: gone.txt\n*** End Patch\nEOF\n"
    assert [(o.kind, o.path) for o in parse_patch(text)] == [("delete", "gone.txt")]


def test_crlf_patch_text() -> None:
    (op,) = parse_patch("*** Begin Patch\r\n*** Add File: w.txt\r\n+one\r\n*** End Patch\r\n")
    assert op.content == "one\n"


def test_multiple_hunks_end_of_file_and_empty_context_lines() -> None:
    text = "\n".join([
        "*** Begin Patch", "*** Update File: m.py",
        "@@ class A:", " a = 1", "-b = 2", "+b = 3", "",  # an empty line is an empty context line
        "@@", "-z", "+Z", "*** End of File",
        "*** End Patch"])
    (op,) = parse_patch(text)
    first, second = op.chunks
    assert first.anchors == ("class A:",)
    assert first.lines == ((" ", "a = 1"), ("-", "b = 2"), ("+", "b = 3"), (" ", ""))
    assert second.anchors == () and second.end_of_file


def test_repeated_anchor_lines_narrow_step_by_step() -> None:
    text = "*** Begin Patch\n*** Update File: c.py\n@@ class Base\n@@     def run(self):\n-        pass\n+        return 1\n*** End Patch"
    (op,) = parse_patch(text)
    assert op.chunks[0].anchors == ("class Base", "    def run(self):")


def test_first_hunk_may_omit_the_marker() -> None:
    (op,) = parse_patch("*** Begin Patch\n*** Update File: f\n import os\n+import sys\n*** End Patch")
    assert op.chunks[0].lines == ((" ", "import os"), ("+", "import sys"))


@pytest.mark.parametrize("text", [
    "no patch here",
    "*** Begin Patch\n*** Add File: a\n+x\n",  # no end marker
    "*** Begin Patch\n*** Frobnicate File: a\n*** End Patch",
    "*** Begin Patch\n*** Update File: a\n*** End Patch",  # an update without hunks
    "*** Begin Patch\n*** Update File: a\n@@\n*** End Patch",  # a hunk without lines
    "*** Begin Patch\n*** Update File: a\n@@\n-x\nstray\n*** End Patch",
])
def test_malformed_patches_are_rejected(text: str) -> None:
    with pytest.raises(PatchError):
        parse_patch(text)


def test_pure_move_parses() -> None:
    (op,) = parse_patch("*** Begin Patch\n*** Update File: a.txt\n*** Move to: b.txt\n*** End Patch")
    assert (op.path, op.move_to, op.chunks) == ("a.txt", "b.txt", ())


# ---------------------------------------------------------------- carriers

PATCH = "*** Begin Patch\n*** Add File: hello.txt\n+Hello\n*** End Patch\n"


def test_custom_tool_input() -> None:
    call = patch_from_custom("apply_patch", PATCH)
    assert call is not None and call.workdir is None
    assert [o.path for o in call.ops] == ["hello.txt"]


def test_function_arguments_input_or_patch() -> None:
    for key in ("input", "patch"):
        call = patch_from_function("apply_patch", {key: PATCH})
        assert call is not None and call.ops[0].content == "Hello\n"


def test_shell_command_vector_with_workdir() -> None:
    call = patch_from_function("shell", {"command": ["apply_patch", PATCH], "workdir": "/w"})
    assert call is not None and call.workdir == "/w"


def test_bash_lc_heredoc() -> None:
    script = f"apply_patch <<'EOF'\n{PATCH}EOF\n"
    call = patch_from_function("shell", {"command": ["bash", "-lc", script]})
    assert call is not None and call.ops[0].path == "hello.txt"
    assert patch_from_argv(["/bin/zsh", "-lc", script]) is not None


@pytest.mark.parametrize("opener", ["<<'EOF'", "<<EOF", '<<"EOF"', "<< 'PATCH'"])
def test_string_command_heredocs(opener: str) -> None:
    tag = "PATCH" if "PATCH" in opener else "EOF"
    script = f"apply_patch {opener}\n{PATCH}{tag}"
    shell_command = patch_from_function("shell_command", {"command": script, "workdir": "repo"})
    exec_command = patch_from_function("exec_command", {"cmd": script})
    assert shell_command is not None and shell_command.workdir == "repo"
    assert exec_command is not None and exec_command.ops[0].content == "Hello\n"


def test_cd_prefix_joins_the_workdir() -> None:
    call = patch_from_script(f"cd 'sub dir' && apply_patch <<'EOF'\n{PATCH}EOF\n", "/repo")
    assert call is not None and call.workdir == "/repo/sub dir"
    assert heredoc_patch(f"cd pkg && applypatch <<EOF\n{PATCH}EOF") == (PATCH.rstrip("\n"), "pkg")


def test_custom_tool_with_json_shell_input() -> None:
    raw = json.dumps({"command": ["apply_patch", PATCH]})
    call = patch_from_custom("shell", raw)
    assert call is not None and call.ops[0].path == "hello.txt"


@pytest.mark.parametrize("args", [
    {"command": ["ls", "-la"]},
    {"command": "cat hello.txt"},
    {"cmd": "echo '*** Begin Patch'"},
    {"command": ["apply_patch", "*** Begin Patch\nbroken"]},
])
def test_non_patches_are_not_patches(args: dict) -> None:
    assert patch_from_function("shell", args) is None


# ---------------------------------------------------------------- replaying updates


def chunk(*lines: str, anchors: tuple[str, ...] = (), eof: bool = False) -> Chunk:
    return Chunk(anchors, tuple((ln[0], ln[1:]) for ln in lines), eof)


FILE = "".join(f"line{i}\n" for i in range(1, 11))  # line1 … line10


def test_two_hunks_report_exact_ranges_on_both_sides() -> None:
    # Hunk 1 replaces line3 with two lines; hunk 2 deletes line8.
    chunks = [chunk(" line2", "-line3", "+three", "+three-b", " line4"),
              chunk(" line7", "-line8", " line9")]
    result = apply_update(FILE, chunks)
    assert result.ok
    # old line 3 → new lines 3-4; old line 8 → (new file has one more line above) empty at new 9
    assert ranges(result) == [(3, 3, 3, 4), (8, 8, 9, 8)]
    assert result.new_text == "line1\nline2\nthree\nthree-b\nline4\nline5\nline6\nline7\nline9\nline10\n"
    assert [p.chunk for p in result.placements] == [0, 1]


def test_pure_insertion_has_an_empty_old_range() -> None:
    result = apply_update(FILE, [chunk(" line5", "+inserted", " line6")])
    assert ranges(result) == [(6, 5, 6, 6)]  # before old line 6; the new line is line 6


def test_separate_runs_inside_one_hunk_are_separate_changes() -> None:
    result = apply_update(FILE, [chunk("-line1", "+one", " line2", " line3", "-line4", "+four")])
    assert ranges(result) == [(1, 1, 1, 1), (4, 4, 4, 4)]


def test_anchor_selects_the_later_occurrence() -> None:
    text = "def a():\n    x = 1\n    return x\n\ndef b():\n    x = 1\n    return x\n"
    result = apply_update(text, [chunk("     x = 1", "-    return x", "+    return x + 1", anchors=("def b():",))])
    assert ranges(result) == [(7, 7, 7, 7)]
    assert result.new_text.endswith("def b():\n    x = 1\n    return x + 1\n")


def test_repeated_anchors_are_sought_in_order() -> None:
    text = "class A:\n  def run(self):\n    pass\nclass B:\n  def run(self):\n    pass\n"
    result = apply_update(text, [chunk("-    pass", "+    return 2", anchors=("class B:", "  def run(self):"))])
    assert ranges(result) == [(6, 6, 6, 6)]


def test_end_of_file_marker_pins_the_match_to_the_end() -> None:
    text = "end\nmiddle\nend\n"
    result = apply_update(text, [chunk("-end", "+END", eof=True)])
    assert ranges(result) == [(3, 3, 3, 3)]
    assert result.new_text == "end\nmiddle\nEND\n"


def test_whitespace_insensitive_fallbacks() -> None:
    text = "alpha\n\tbeta   \ngamma\n"
    result = apply_update(text, [chunk(" alpha", "-beta", "+BETA", " gamma")])  # matches after strip()
    assert ranges(result) == [(2, 2, 2, 2)]
    assert result.changes[0].old_lines == ("\tbeta   ",)  # as it was in the file
    assert result.new_text == "alpha\nBETA\ngamma\n"


def test_loosely_matched_context_is_rewritten_and_reported() -> None:
    # Codex writes the patch's text over the matched region: the typographic quotes and the
    # trailing blanks of the context lines are replaced too, so those lines changed.
    text = "alpha   \n\tbeta\n“quoted” — dash\n"
    result = apply_update(text, [chunk(" alpha", "-beta", "+BETA", ' "quoted" - dash')])
    assert result.new_text == 'alpha\nBETA\n"quoted" - dash\n'
    assert ranges(result) == [(1, 3, 1, 3)]
    assert result.changes[0].old_lines == ("alpha   ", "\tbeta", "“quoted” — dash")


def test_exact_match_is_preferred_to_a_fuzzy_earlier_one() -> None:
    text = "x  \ny\nx\ny\n"  # line 1 matches "x" only after rstrip; line 3 matches exactly
    result = apply_update(text, [chunk(" x", "-y", "+Y")])
    assert ranges(result) == [(4, 4, 4, 4)]


def test_chunk_without_old_lines_is_appended_at_the_end() -> None:
    result = apply_update("a\nb\n", [chunk("+c", "+d", anchors=("a",))])
    assert ranges(result) == [(3, 2, 3, 4)]
    assert result.new_text == "a\nb\nc\nd\n"


def test_trailing_empty_context_line_stands_for_the_final_newline() -> None:
    result = apply_update("a\nlast", [chunk(" a", "-last", "+LAST", " ")])
    assert result.ok and result.new_text == "a\nLAST\n"  # Codex always ends the file with a newline
    assert ranges(result) == [(2, 2, 2, 2)]


def test_unlocatable_hunk_is_reported_not_guessed() -> None:
    result = apply_update(FILE, [chunk(" line2", "-line3", "+x"), chunk(" nowhere", "-line9", "+y")])
    assert not result.ok and result.new_text is None and result.changes == []
    assert "hunk 2" in (result.error or "")


def test_missing_anchor_is_reported() -> None:
    result = apply_update(FILE, [chunk("-line3", "+x", anchors=("def missing():",))])
    assert not result.ok and "anchor" in (result.error or "")


def test_hunks_are_sought_forward_only() -> None:
    # The second hunk's context lies before the first hunk: Codex does not look back.
    result = apply_update(FILE, [chunk("-line5", "+five"), chunk("-line2", "+two")])
    assert not result.ok


def test_seek_sequence_basics() -> None:
    lines = ["foo", "bar", "baz"]
    assert seek_sequence(lines, ["bar", "baz"], 0, False) == 1
    assert seek_sequence(lines, ["bar"], 2, False) is None
    assert seek_sequence(lines, [], 2, False) == 2
    assert seek_sequence(lines, ["a", "b", "c", "d"], 0, False) is None
    assert seek_sequence(["   foo  "], ["foo"], 0, False) == 0


def test_patch_changes_lists_removed_and_added_lines() -> None:
    removed, added = patch_changes([chunk(" a", "-b", "+B"), chunk("-c", "+C", "+D")])
    assert removed == ["b", "c"] and added == ["B", "C", "D"]


# ---------------------------------------------------------------- property: ranges agree with the texts

@st.composite
def edited_files(draw: st.DrawFn) -> tuple[list[str], list[Chunk], list[str]]:
    """A file of distinct lines, non-overlapping edits with 0-2 context lines, and the intended result."""
    n = draw(st.integers(3, 40))
    old = [f"L{i}" for i in range(1, n + 1)]
    chunks: list[Chunk] = []
    result: list[str] = []
    pos = 0  # next unconsumed old line (0-based)
    fresh = iter(f"N{i}" for i in range(10_000))
    while pos < n and len(chunks) < 4 and draw(st.booleans()):
        before = draw(st.integers(0, 2))
        if pos + before > n:
            break
        start = draw(st.integers(pos + before, n))
        removed = draw(st.integers(0, min(3, n - start)))
        after = draw(st.integers(0, min(2, n - start - removed)))
        if removed == 0 and before + after == 0:
            after = min(1, n - start)
            if after == 0:
                break
        added = [next(fresh) for _ in range(draw(st.integers(0 if removed else 1, 3)))]
        lines = ([(" ", t) for t in old[start - before:start]] + [("-", t) for t in old[start:start + removed]]
                 + [("+", t) for t in added] + [(" ", t) for t in old[start + removed:start + removed + after]])
        chunks.append(Chunk((), tuple(lines)))
        result += old[pos:start] + added
        pos = start + removed
        result += old[pos:pos + after]
        pos += after
    result += old[pos:]
    return old, chunks, result


@settings(max_examples=300, deadline=None)
@given(edited_files())
def test_replayed_ranges_agree_with_both_files(case: tuple[list[str], list[Chunk], list[str]]) -> None:
    old, chunks, expected = case
    if not chunks:
        return
    result = apply_update("".join(f"{t}\n" for t in old), chunks)
    assert result.ok
    new = result.new_text.split("\n")[:-1] if result.new_text else []
    assert new == expected
    rebuilt: list[str] = []
    pos = 0
    for c in result.changes:
        assert old[c.old_start - 1:c.old_end] == list(c.old_lines) and c.old_end - c.old_start + 1 == len(c.old_lines)
        assert new[c.new_start - 1:c.new_end] == list(c.new_lines) and c.new_end - c.new_start + 1 == len(c.new_lines)
        rebuilt += old[pos:c.old_start - 1] + list(c.new_lines)
        pos = c.old_start - 1 + len(c.old_lines)
        assert c.new_start == len(rebuilt) - len(c.new_lines) + 1
    assert rebuilt + old[pos:] == new


@pytest.mark.parametrize(("name", "payload", "meant"), [
    ("apply_patch", "[REDACTED]", True),  # the freeform tool, its text lost
    ("apply_patch", {"input": "*** Begin Patch\n*** Update File: a.py"}, True),
    ("shell", {"command": ["apply_patch", "<redacted>"]}, True),
    ("shell", {"command": ["bash", "-lc", "cd src && apply_patch <<'EOF'\n[REDACTED]\nEOF"]}, True),
    ("shell_command", {"command": "apply_patch <<'EOF'\n*** Begin Patch\n"}, True),
    ("exec_command", {"cmd": "applypatch <<EOF\nx\nEOF"}, True),
    ("custom", "*** Begin Patch\n*** Frobnicate File: x", True),
    ("shell_command", {"command": "grep -rn apply_patch src"}, False),
    ("shell", {"command": ["bash", "-lc", "echo apply_patch"]}, False),
    ("exec", "await tools.apply_patch(p)", False),  # code mode: its patches come as patch_apply_end
    ("shell", None, False),
])
def test_patch_attempt_knows_a_call_meant_to_apply_a_patch(name: str, payload: object, meant: bool) -> None:
    assert patch_attempt(name, payload) is meant
