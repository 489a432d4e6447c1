"""Notes (memories) in the language server, through a real LSP client (pytest-lsp), a real store
and its memory log: hovers, lenses, the remember/forget/re-anchor/recall commands, code actions
and drift diagnostics."""

from __future__ import annotations

import ast
import asyncio
import json
import re
from pathlib import Path
from typing import Any

import pytest
from conftest import SPOTTER_MAIN, build_spot_repo, created_by, run_engram
from lsprotocol import types
from pytest_lsp import LanguageClient
from test_lsp import client, lenses, open_doc, spot, start  # noqa: F401 - fixtures shared with test_lsp

LONG_NOTE = "\n".join(["Retries stop at three: the payment API bans clients that retry more."] +
                      [f"detail line {i}" for i in range(1, 10)])


def rng(a: int, b: int) -> dict[str, Any]:
    """Lines a..b (0-based, inclusive) as an LSP range."""
    return {"start": {"line": a, "character": 0}, "end": {"line": b + 1, "character": 0}}


async def command(lc: LanguageClient, name: str, *args: Any) -> Any:
    return await lc.workspace_execute_command_async(types.ExecuteCommandParams(command=name,
                                                                                   arguments=list(args)))


async def hover_text(lc: LanguageClient, uri: str, line: int) -> str | None:
    h = await lc.text_document_hover_async(types.HoverParams(
        text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(line=line, character=1)))
    return None if h is None else h.contents.value


def listed(root: Path) -> dict[str, dict[str, Any]]:
    """What `engram memory list --json` sees, by id."""
    out = json.loads(run_engram(root, "memory", "list", "--json").stdout)
    return {m["id"]: m for m in out["memories"]}


def replace_lines(lc: LanguageClient, uri: str, version: int, start: int, end: int, text: str) -> None:
    """Lines start..end-1 (0-based; start == end: insert before `start`) replaced by `text`."""
    lc.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
        content_changes=[types.TextDocumentContentChangePartial(
            range=types.Range(start=types.Position(line=start, character=0), end=types.Position(line=end, character=0)),
            text=text)]))


def insert_top(lc: LanguageClient, uri: str, version: int, text: str) -> None:
    replace_lines(lc, uri, version, 0, 0, text)


async def test_a_note_comes_before_the_evidence_and_follows_unsaved_edits(
        client: LanguageClient, spot: Path, agent_file: str) -> None:  # noqa: F811
    await start(client, spot)
    uri = open_doc(client, spot / agent_file)
    line = (await lenses(client, uri))[0].range.start.line
    made = await command(client, "engram.remember", uri, rng(line, line + 2), LONG_NOTE, "decision")
    assert made["id"] in listed(spot), "the command wrote to the store the command line reads"
    md = await hover_text(client, uri, line + 1)
    assert md is not None
    assert "**decision**" in md and "payment API bans clients" in md and "a person" in md
    assert "more line" in md and "detail line 9" not in md, "a long note shows its first lines and says there is more"
    assert md.index("payment API") < md.index("Claude Code"), "the note comes before the evidence"

    insert_top(client, uri, 2, "# one\n# two\n# three\n")  # unsaved: the file on disk is unchanged
    moved = await hover_text(client, uri, line + 4)
    assert moved is not None and "payment API bans clients" in moved
    before = await hover_text(client, uri, line)
    assert before is None or "payment API" not in before, "the note left the lines it no longer covers"
    opened = await command(client, "engram.explain", uri, rng(line + 3, line + 5))  # the document an editor opens
    assert [n["id"] for n in opened["result"]["notes"]] == [made["id"]]
    assert "**Notes on these lines:**" in opened["markdown"] and "payment API bans clients" in opened["markdown"]

    # A note written while the buffer is dirty anchors to the buffer's text: on disk (what the
    # command line resolves against) its code is three lines higher.
    dirty = await command(client, "engram.remember", uri, rng(line + 3, line + 5),
                          "Written on an unsaved buffer: the loop's first lines.", "fact")
    on_disk = listed(spot)[dirty["id"]]["anchors"][0]
    assert on_disk["lines"] == [line + 1, line + 3] and on_disk["state"] in ("intact", "moved"), on_disk
    await command(client, "engram.forget", dirty["id"])
    gone = await command(client, "engram.forget", made["id"])
    assert gone["forgotten"] and made["id"] not in listed(spot)
    after = await hover_text(client, uri, line + 4)
    assert after is not None and "payment API" not in after, "the evidence stays, the note is gone"


async def test_lenses_count_notes_and_a_note_alone_gets_one(  # noqa: F811
        client: LanguageClient, spot: Path, agent_file: str) -> None:  # noqa: F811
    await start(client, spot)
    plain = spot / "shopping.txt"
    plain.write_text("shopping list\napples\npears\nplums\nfigs\n")
    uri = open_doc(client, plain)
    assert await lenses(client, uri) == []
    assert await hover_text(client, uri, 2) is None, "no note and no evidence: no hover"
    alone = await command(client, "engram.remember", uri, rng(1, 2), "Pears only when ripe.", "preference")
    found = await lenses(client, uri)
    assert [lens.range.start.line for lens in found] == [1]
    assert (await client.code_lens_resolve_async(found[0])).command.title == "why? 1 note"

    code = open_doc(client, spot / agent_file)
    first = (await lenses(client, code))[0]
    kept = await command(client, "engram.remember", code, rng(first.range.start.line, first.range.start.line + 1),
                         "This block is the retry loop the reviewers asked for.", "fact")
    again = [lens for lens in await lenses(client, code) if lens.range.start.line == first.range.start.line]
    title = (await client.code_lens_resolve_async(again[0])).command.title
    assert re.fullmatch(r"why\? \d+ sessions? · 1 note · Claude Code · .+ ago", title), title

    edited = await command(client, "engram.edit", alone["id"], {"content": "Pears only when ripe and cold."})
    assert edited["content"] == "Pears only when ripe and cold." and listed(spot)[alone["id"]]["content"] == edited["content"]
    assert "ripe and cold" in (await hover_text(client, uri, 1) or "")
    with pytest.raises(Exception, match="kind"):
        await command(client, "engram.edit", alone["id"], {"kind": "gossip"})
    hits = await command(client, "engram.recall", "ripe pears")
    assert hits and hits[0]["id"] == alone["id"] and hits[0]["location"]["uri"] == uri
    assert hits[0]["location"]["range"]["start"]["line"] == 1
    # asked from a document of no store (untitled, or a file outside the repository): the store's
    # recall, as from no document (it was an error, so the editor's Recall Notes failed there)
    loose = spot.parent / "loose-notes.py"
    loose.write_text("x = 1\n")
    client.text_document_did_open(types.DidOpenTextDocumentParams(text_document=types.TextDocumentItem(
        uri="untitled:Untitled-1", language_id="python", version=1, text="y = 2\n")))
    for elsewhere in ("untitled:Untitled-1", open_doc(client, loose)):
        there = await command(client, "engram.recall", "ripe pears", elsewhere)
        assert there and there[0]["id"] == alone["id"], elsewhere
    for name in ("engram.remember", "engram.explain"):  # (it said 'unknown document …: open it first')
        with pytest.raises(Exception, match="untitled:Untitled-1 is not a file on disk: save it in a repository"):
            await command(client, name, "untitled:Untitled-1", rng(0, 0), "a note")
    for made in (alone, kept):
        await command(client, "engram.forget", made["id"])
    assert not {alone["id"], kept["id"]} & set(listed(spot))


def action_command(action: Any) -> dict[str, Any]:
    """A code action's command as sent. (lsprotocol's client reads `Command | CodeAction` as a
    Command, its `command` field then holding the action's command object, printed.)"""
    cmd = action.command
    if isinstance(cmd, types.Command):
        return {"command": cmd.command, "arguments": cmd.arguments}
    if isinstance(cmd, str) and cmd.startswith("{"):
        return ast.literal_eval(cmd)
    return {"command": cmd, "arguments": action.arguments}


async def wait_for(predicate: Any, timeout: float = 20.0) -> None:
    for _ in range(int(timeout / 0.1)):
        if predicate():
            return
        await asyncio.sleep(0.1)
    raise AssertionError("timed out")


DRIFT_TEXT = "def area(w, h):\n    return w * h\n\n\ndef perimeter(w, h):\n    total = 2 * (w + h)\n" \
             "    assert total >= 0\n    return total\n"


@pytest.mark.parametrize("enabled", [True, False])
async def test_a_vanished_note_is_a_hint_with_actions_and_the_setting_turns_it_off(
        client: LanguageClient, spot: Path, enabled: bool) -> None:  # noqa: F811
    await start(client, spot, {"noteDiagnostics": enabled, "debounce": 0.05})
    path = spot / f"shapes_{enabled}.py"
    path.write_text(DRIFT_TEXT)
    uri = open_doc(client, path)
    made = await command(client, "engram.remember", uri, rng(4, 7), "The perimeter of a negative box is refused.",
                         "decision")
    await wait_for(lambda: uri in client.diagnostics)
    assert not client.diagnostics[uri], "an intact note is no diagnostic"
    # The person deletes the anchored function (unsaved).
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=2),
        content_changes=[types.TextDocumentContentChangeWholeDocument(text="def area(w, h):\n    return w * h\n")]))
    if not enabled:
        await asyncio.sleep(1.0)
        assert not client.diagnostics[uri]
        await command(client, "engram.forget", made["id"])
        return
    await wait_for(lambda: bool(client.diagnostics.get(uri)))
    (diag,) = client.diagnostics[uri]
    assert diag.severity == types.DiagnosticSeverity.Hint and diag.code == "note-drift"
    assert "gone" in diag.message and "perimeter of a negative box" in diag.message
    actions = await client.text_document_code_action_async(types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri=uri), range=diag.range,
        context=types.CodeActionContext(diagnostics=[diag])))
    titles = [a.title for a in actions]
    assert "Remember a note for the selection…" in titles
    reanchor = next(a for a in actions if a.title.startswith("Re-anchor note"))
    assert any(t.startswith("Forget note") for t in titles)
    run = action_command(reanchor)
    assert run["command"] == "engram.reanchor" and run["arguments"][:2] == [made["id"], uri]
    await command(client, run["command"], made["id"], uri, rng(0, 1))  # "its code is here now"
    await wait_for(lambda: not client.diagnostics[uri])
    assert listed(spot)[made["id"]]["anchors"][0]["lines"] == [1, 2]
    await command(client, "engram.forget", made["id"])


async def test_an_edited_note_is_a_hint_below_the_threshold(client: LanguageClient, spot: Path) -> None:  # noqa: F811
    await start(client, spot, {"noteDriftBelow": 1.0, "debounce": 0.05})
    path = spot / "shapes_edited.py"
    path.write_text(DRIFT_TEXT)
    uri = open_doc(client, path)
    made = await command(client, "engram.remember", uri, rng(4, 7), "Perimeters are never negative.", "fact")
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=2),
        content_changes=[types.TextDocumentContentChangeWholeDocument(
            text=DRIFT_TEXT.replace("    assert total >= 0\n", "    if total < 0:\n        raise ValueError(total)\n"))]))
    await wait_for(lambda: bool(client.diagnostics.get(uri)))
    (diag,) = client.diagnostics[uri]
    assert "edited" in diag.message and diag.range.start.line == 4
    md = await hover_text(client, uri, 5)
    assert md is not None and re.search(r"edited \d+%", md), md
    await command(client, "engram.forget", made["id"])
    await wait_for(lambda: not client.diagnostics[uri])


async def published(lc: LanguageClient, uri: str, version: int) -> float:
    """When (loop time) the diagnostics of `uri` at `version` arrive: its notes were resolved."""
    while True:
        params = await lc.wait_for_notification(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
        if params.uri == uri and params.version == version:
            return asyncio.get_running_loop().time()


async def test_a_hover_right_after_an_edit_does_not_wait_for_the_notes_resolution(
        client: LanguageClient, spotter: Path, tmp_path: Path) -> None:  # noqa: F811
    """Thousands of notes on one file: after an edit the server resolves them again against the
    buffer (debounced) on its worker thread. A hover over the evidence asked while that runs
    answers before it ends (the version's diagnostics), with the note at the line the edit moved it
    to; it once waited behind the whole resolution."""
    from engram.memory.interchange import import_records  # noqa: PLC0415
    from engram.memory.memories import Memories  # noqa: PLC0415
    from engram.store.repo import Store  # noqa: PLC0415

    root = tmp_path / "repo"
    build_spot_repo(spotter, root)
    rel = next(r for r, c in sorted(created_by(spotter, SPOTTER_MAIN).items())
               if (root / r).read_text() == c and len(c.splitlines()) > 60)
    n_lines = len((root / rel).read_text().splitlines())
    records = [("t", 1, {"content": "Marker: this block is generated, edit the template", "kind": "decision",
                         "at": [f"{rel}:5-7"]})]
    records += [("t", i + 2, {"content": f"note {i} on the code", "kind": "fact",
                              "at": [f"{rel}:{1 + i % (n_lines - 3)}-{3 + i % (n_lines - 3)}"]}) for i in range(2500)]
    mem = Memories(Store(root))
    import_records(mem, records, dedup=False)
    mem.db.close()

    await start(client, root)
    uri = (root / rel).as_uri()
    opened = asyncio.ensure_future(published(client, uri, 1))
    open_doc(client, root / rel)
    await opened  # nothing left to do: the notes of the text as opened are resolved
    assert await lenses(client, uri)
    assert "Marker" in (await hover_text(client, uri, 5) or "")
    resolved = asyncio.ensure_future(published(client, uri, 2))
    # Three lines on top move every note; lines 20 to the end (of the text as opened) put back as
    # they were still count as changed there: the notes on them (most of the 2,500) resolve again.
    below = "".join((root / rel).read_text().splitlines(keepends=True)[20:])
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=2),
        content_changes=[types.TextDocumentContentChangePartial(range=types.Range(
            start=types.Position(line=0, character=0), end=types.Position(line=0, character=0)),
            text="# one\n# two\n# three\n"),
            types.TextDocumentContentChangePartial(range=types.Range(
                start=types.Position(line=23, character=0), end=types.Position(line=n_lines + 3, character=0)),
                text=below)]))
    await asyncio.sleep(0.5)  # past the debounce (0.4 s): the resolution of version 2 has started
    t0 = asyncio.get_running_loop().time()
    md = await hover_text(client, uri, 4 + 3)
    answered = asyncio.get_running_loop().time()
    assert md is not None and "Marker" in md and "Claude Code" in md, "the note, moved 3 lines down, and the evidence"
    done = await resolved
    assert answered < done, f"the hover ({answered - t0:.3f} s) answered before the resolution ended ({done - t0:.3f} s)"

    # The marker's lines rewritten in place: following the edit leaves its note where it was, and
    # the resolution that comes after finds it edited: the editor is asked for lenses again.
    asked = len(client.refreshes)  # type: ignore[attr-defined]
    resolved = asyncio.ensure_future(published(client, uri, 3))
    replace_lines(client, uri, 3, 7, 9, "rewritten = 1\nentirely = 2\n")
    await resolved
    for _ in range(50):
        if len(client.refreshes) > asked:  # type: ignore[attr-defined]
            break
        await asyncio.sleep(0.1)
    assert len(client.refreshes) > asked, "lenses asked for again once the notes were resolved"  # type: ignore[attr-defined]


async def test_an_edit_resolves_the_notes_it_touched_and_another_process_notes_appear(
        client: LanguageClient, spot: Path) -> None:  # noqa: F811
    """After an edit only the notes whose lines it changed are resolved again (the others moved
    with it stand, their text being the same): a note rewritten is `edited`, a note below it keeps
    its place moved by the lines added, and a note the command line writes meanwhile (another
    process) appears without any edit."""
    await start(client, spot, {"noteDriftBelow": 1.0, "debounce": 0.05})
    path = spot / "shapes_two.py"
    path.write_text(DRIFT_TEXT + "\n\ndef volume(w, h, d):\n    return w * h * d\n")
    uri = open_doc(client, path)
    edited = await command(client, "engram.remember", uri, rng(4, 7), "Perimeters are never negative.", "fact")
    below = await command(client, "engram.remember", uri, rng(10, 11), "Volumes are in cubic metres.", "fact")
    await wait_for(lambda: uri in client.diagnostics)
    assert not client.diagnostics[uri]
    resolved = asyncio.ensure_future(published(client, uri, 2))
    replace_lines(client, uri, 2, 6, 7, "    if total < 0:\n        raise ValueError(total)\n")
    await resolved
    (diag,) = client.diagnostics[uri]
    assert diag.data == {"memory": edited["id"]} and "edited" in diag.message and diag.range.start.line == 4
    md = await hover_text(client, uri, 12)
    assert md is not None and "cubic metres" in md, "the note below, one line further down"
    assert "cubic metres" not in (await hover_text(client, uri, 10) or "")

    third = run_engram(spot, "remember", "Area is width times height.", "--at", "shapes_two.py:1-2", "--json")
    third_id = json.loads(third.stdout)["id"]
    for _ in range(80):  # the server sees the store changed at its next look (2 s at most)
        md = await hover_text(client, uri, 0)
        if md is not None and "width times height" in md:
            break
        await asyncio.sleep(0.1)
    assert md is not None and "width times height" in md, "another process's note, with no edit of the buffer"
    for ref in (edited["id"], below["id"], third_id):
        await command(client, "engram.forget", ref)


PANTRY = ("def stock(pantry):\n    return sorted(pantry)\n\n\n"
          "def reorder(pantry, supplier):\n    missing = [item for item in pantry if pantry[item] < 2]\n"
          "    supplier.order(missing, urgent=len(missing) > 5)\n    return missing\n")


async def test_a_lens_moves_with_an_inserted_line_at_once_and_a_deleted_note_loses_it(
        client: LanguageClient, spot: Path) -> None:  # noqa: F811
    """Lenses asked right after an edit answer from the notes' last places moved along with it,
    not after the resolution (debounced, 1 s here): a lens below an inserted line is one line lower
    in the first answer. A note whose code was deleted loses its lens once the resolution found it
    gone, and the editor is asked for lenses again."""
    await start(client, spot, {"debounce": 1.0})
    path = spot / "pantry.py"
    path.write_text(PANTRY)
    uri = open_doc(client, path)
    top = await command(client, "engram.remember", uri, rng(0, 1), "Stock is listed sorted for the printout.", "fact")
    low = await command(client, "engram.remember", uri, rng(4, 7), "Reorders go urgent past five items.", "decision")
    assert [lens.range.start.line for lens in await lenses(client, uri)] == [0, 4]

    moved = asyncio.ensure_future(published(client, uri, 2))
    insert_top(client, uri, 2, "import logging\n")
    assert [lens.range.start.line for lens in await lenses(client, uri)] == [1, 5], \
        "both lenses one line lower in the answer right after the edit"
    assert not moved.done(), "answered before the notes of the new text were resolved"
    await moved

    asked = len(client.refreshes)  # type: ignore[attr-defined]
    resolved = asyncio.ensure_future(published(client, uri, 3))
    replace_lines(client, uri, 3, 5, 9, "")  # `reorder` deleted (unsaved)
    await resolved
    assert [lens.range.start.line for lens in await lenses(client, uri)] == [1], "the deleted code's note has no lens"
    await wait_for(lambda: len(client.refreshes) > asked)  # type: ignore[attr-defined]
    for made in (top, low):
        await command(client, "engram.forget", made["id"])
