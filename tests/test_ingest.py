"""Capture as a user runs it: idempotence, growing sessions, crashes, bad input, record, gc."""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from conftest import SPOTTER_MAIN, SPOTTER_OTHER, created_by, git, run_engram, session_cwd, shown_events
from engram.index.catalog import resolve_tapes, tape_file
from engram.index.db import open_db
from engram.index.kinds import KIND_NO
from engram.query.direct import KIND_WEIGHT
from engram.store.repo import Store
from engram.tape import events as E
from engram.tape.reader import TapeReader


def tapes_on_disk(root: Path) -> set[str]:
    return {p.name.split(".")[0] for p in (root / ".engram" / "tapes").glob("*.jsonl.zst")}


def session_events(root: Path, session: str) -> list[dict[str, Any]]:
    """All events of a session's segments in chain order, metas left out."""
    store = Store(root)
    db = open_db(store)
    out: list[dict[str, Any]] = []
    for row in resolve_tapes(db, session):
        with TapeReader(tape_file(store, row.id)) as r:
            out.extend(list(r.events())[1:])
    db.close()
    return out


def new_repo(base: Path, name: str) -> Path:
    root = base / name
    root.mkdir()
    git(root, "init", "-q")
    run_engram(root, "init")
    return root


def test_init_of_a_path_that_is_no_directory_is_refused_and_makes_nothing(tmp_path: Path) -> None:
    """`engram init PATH`: a PATH not there made the folders (a typo became a tree with a store in
    it); a file was a traceback (NotADirectoryError). Both are one line, exit 1."""
    (tmp_path / "notes.txt").write_text("x\n")
    for path, what in (("no/such/repo", "no such directory"), ("notes.txt", "not a directory")):
        proc = run_engram(tmp_path, "init", path, check=False)
        assert proc.returncode == 1 and "Traceback" not in proc.stderr
        assert proc.stderr == f"engram: {path}: {what}; give the repository's root (or run `engram init` in it)\n"
    assert not (tmp_path / "no").exists() and not (tmp_path / ".engram").exists()


def test_init_of_a_folder_inside_a_repository_makes_the_store_at_its_root(tmp_path: Path) -> None:
    """`engram init src` in a repository made `src/.engram`, warning falsely that src 'is not a git
    repository'; commands run in src then found that empty store, not the repository's (its notes
    and sessions seemed gone). `engram init .engram` made `.engram/.engram`. The store goes at the
    repository's root, as README says, and the answer says where."""
    root = new_repo(tmp_path, "mono")
    (root / "src").mkdir()
    run_engram(root, "remember", "kept in the root store")
    for path in ("src", ".engram"):
        proc = run_engram(root, "init", path)
        assert "not a git repository" not in proc.stderr, proc.stderr
        assert proc.stdout == f"already initialised {root / '.engram'} (the root of the repository {path} is in)\n"
    assert not (root / "src" / ".engram").exists() and not (root / ".engram" / ".engram").exists()
    assert "kept in the root store" in run_engram(root / "src", "memory", "list").stdout


def test_init_is_idempotent_and_excludes_the_store_from_git(tmp_path: Path) -> None:
    root = tmp_path / "r"
    root.mkdir()
    git(root, "init", "-q")
    (root / "a.txt").write_text("tracked\n")
    git(root, "add", "a.txt")
    assert run_engram(root, "init").stdout == f"initialised {root / '.engram'}\n"
    again = run_engram(root, "init", "--json")  # (it said "initialised" again, as if it had made a store)
    assert json.loads(again.stdout)["created"] is False
    assert run_engram(root, "init").stdout == f"already initialised {root / '.engram'}\n"
    exclude = (root / ".git" / "info" / "exclude").read_text()
    assert exclude.count("/.engram/") == 1
    assert git(root, "status", "--porcelain") == "A  a.txt\n", "the store never shows up in git"
    plain = tmp_path / "nogit"
    plain.mkdir()
    proc = run_engram(plain, "init")
    assert "not a git repository" in proc.stderr and (plain / ".engram").is_dir()


def test_commands_outside_a_store_say_what_to_do(tmp_path: Path) -> None:
    proc = run_engram(tmp_path, "tapes", check=False)
    assert proc.returncode == 1 and "engram init" in proc.stderr and "Traceback" not in proc.stderr


def test_reingest_changes_nothing(spotter: Path, repo: Path) -> None:
    run_engram(repo, "ingest", str(spotter))
    first = tapes_on_disk(repo)
    out = run_engram(repo, "ingest", str(spotter)).stdout
    assert tapes_on_disk(repo) == first and "0 new tapes" in out and f"{len(first)} sessions unchanged" in out


def by_source(events: list[dict[str, Any]]) -> dict[str | None, list[dict[str, Any]]]:
    out: dict[str | None, list[dict[str, Any]]] = {}
    for ev in events:
        out.setdefault(ev.get("agent"), []).append(ev)
    return out


def _grow(src: Path, dst: Path, share: float) -> None:
    """Copy the first `share` of every file's bytes, cutting mid-line like a live writer would."""
    for p in src.rglob("*.jsonl"):
        out = dst / p.relative_to(src)
        out.parent.mkdir(parents=True, exist_ok=True)
        data = p.read_bytes()
        out.write_bytes(data[: int(len(data) * share)])


def test_growing_session_gives_exactly_the_events_of_one_full_ingest(spotter: Path, tmp_path: Path) -> None:
    session = tmp_path / "live"
    session.mkdir()
    shutil.copy(spotter / f"{SPOTTER_MAIN}.jsonl", session / "full.jsonl")
    full_src = tmp_path / "full"
    full_src.mkdir()
    shutil.copy(spotter / f"{SPOTTER_MAIN}.jsonl", full_src / f"{SPOTTER_MAIN}.jsonl")
    shutil.copytree(spotter / SPOTTER_MAIN, full_src / SPOTTER_MAIN)
    live = tmp_path / "live-src"
    grown = new_repo(tmp_path, "grown")
    for share in (0.37, 0.71, 1.0):
        _grow(full_src, live, share)
        run_engram(grown, "ingest", str(live))
    once = new_repo(tmp_path, "once")
    run_engram(once, "ingest", str(full_src))
    chained = session_events(grown, SPOTTER_MAIN)
    single = session_events(once, SPOTTER_MAIN)
    assert len(resolve_tapes(open_db(Store(grown)), SPOTTER_MAIN)) == 3
    # Within each source file the order is the file's; across a session's files (main, subagents)
    # a segment chain interleaves them by capture time, so compare per source.
    assert by_source(chained) == by_source(single)
    assert len(chained) == len(single)
    # A fourth run with nothing new writes nothing.
    before = tapes_on_disk(grown)
    run_engram(grown, "ingest", str(live))
    assert tapes_on_disk(grown) == before


def test_every_segment_names_its_predecessor(spotter: Path, tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    data = (spotter / f"{SPOTTER_MAIN}.jsonl").read_bytes()
    f = src / f"{SPOTTER_MAIN}.jsonl"
    root = new_repo(tmp_path, "r")
    f.write_bytes(data[: len(data) // 2])
    run_engram(root, "ingest", str(f))
    f.write_bytes(data)
    run_engram(root, "ingest", str(f))
    rows = resolve_tapes(open_db(Store(root)), SPOTTER_MAIN)
    assert [r.prev for r in rows] == [None, rows[0].id]
    with TapeReader(tape_file(Store(root), rows[1].id)) as r:
        src_meta = r.meta()["sources"][0]
    assert 0 < src_meta["start"] < src_meta["end"] == len(data)


@pytest.mark.slow
def _left_behind(cwd: Path, wait: float = 10.0) -> list[int]:
    """Processes still running in `cwd` (the workers of an ingest started there), after up to
    `wait` seconds for them to notice."""
    deadline = time.monotonic() + wait
    while True:
        left = []
        for d in Path("/proc").iterdir():
            if d.name.isdigit():
                try:
                    if Path(os.readlink(d / "cwd")) == cwd and (d / "stat").read_text().split(")")[-1].split()[0] != "Z":
                        left.append(int(d.name))
                except OSError:
                    continue
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.1)


def test_sigkill_during_ingest_never_leaves_a_broken_store(spotter: Path, tmp_path: Path) -> None:
    reference = new_repo(tmp_path, "reference")
    run_engram(reference, "ingest", str(spotter))
    expected = tapes_on_disk(reference)
    template = new_repo(tmp_path, "template")
    rng = random.Random(20261122)
    t0 = time.monotonic()
    run_engram(template, "ingest", str(spotter))
    full_time = time.monotonic() - t0
    shutil.rmtree(template / ".engram")
    run_engram(template, "init")
    killed_mid_write = 0
    for i in range(50):
        root = tmp_path / f"run{i}"
        shutil.copytree(template, root)
        proc = subprocess.Popen([sys.executable, "-m", "engram.cli", "ingest", str(spotter)], cwd=root,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(rng.uniform(0.0, full_time * 1.1))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert _left_behind(root.resolve()) == [], "a killed ingest's workers end with it"
        store = Store(root)
        partial = tapes_on_disk(root)
        assert partial <= expected, "only whole, known tapes are visible"
        if 0 < len(partial) < len(expected):
            killed_mid_write += 1
        for tid in partial:
            with TapeReader(tape_file(store, tid)) as r:
                r.verify()
        listing = run_engram(root, "tapes", "--json")  # the store stays readable
        assert isinstance(json.loads(listing.stdout or "[]"), list)
        run_engram(root, "ingest", str(spotter))
        assert tapes_on_disk(root) == expected
        catalog = {t["id"] for t in json.loads(run_engram(root, "tapes", "--json").stdout)}
        assert catalog == expected
        assert not list((root / ".engram" / "tapes").glob(".tmp-*"))
        shutil.rmtree(root)
    assert killed_mid_write > 0, "some kills landed between tapes"


def test_bad_input_is_counted_never_a_traceback(spotter: Path, repo: Path, tmp_path: Path) -> None:
    src = tmp_path / "bad"
    src.mkdir()
    good = (spotter / f"{SPOTTER_MAIN}.jsonl").read_bytes().splitlines(keepends=True)[:60]
    lines = list(good)
    lines.insert(5, good[6][: len(good[6]) // 2] + b"\n")  # truncated line in the middle
    lines.insert(9, b'{"type":"user","message":5,"uuid":"u-1","sessionId":"x"}\n')  # wrong types
    lines.insert(10, b"[1, 2, 3]\n")
    lines.insert(11, bytes(range(256)) + b"\n")  # binary junk
    lines.insert(12, b'{"type":"user","uuid":"u-2","sessionId":"' + SPOTTER_MAIN.encode() +
                 b'","message":{"content":"caf\xe9 non-UTF-8"}}\n')
    lines.insert(13, b'{"type":"user","message":{"content":"' + b"x" * (50 * 1024 * 1024) + b'"}}\n')  # 50 MB
    lines.append(good[-1][:40])  # truncated last line (a live session)
    (src / "session.jsonl").write_bytes(b"".join(lines))
    (src / "empty.jsonl").write_bytes(b"")
    (src / "junk.jsonl").write_bytes(os.urandom(4096))
    (src / "emptydir").mkdir()
    proc = run_engram(repo, "ingest", str(src), str(src / "emptydir"))
    out = proc.stdout + proc.stderr
    assert "Traceback" not in out
    for reason in ("malformed JSON line", "line is not a JSON object", "line longer than",
                   "non-UTF-8 bytes replaced", "truncated last line", "empty file", "not a transcript",
                   "no transcripts"):
        assert reason in out, reason
    evs = session_events(repo, SPOTTER_MAIN)
    assert any(e.get("text") == "caf\ufffd non-UTF-8" for e in evs)
    assert any(e.get("text") == "Implement spotter-gqc" for e in evs)


def test_records_glued_on_one_line_are_both_read(spotter: Path, tmp_path: Path) -> None:
    """Real Claude Code files sometimes hold a record written straight after the previous one's
    closing brace, with no newline (7 lines in entireio/cli's 290 sessions: an assistant message
    followed by a `summary`). The line is invalid JSON as a whole; the message used to be lost."""
    good = (spotter / f"{SPOTTER_MAIN}.jsonl").read_bytes().splitlines(keepends=True)[:60]
    assert b'"Let me start by understanding' in good[7] and b'"tool_use"' in good[8]
    glued = [*good[:7], good[7].rstrip(b"\n") + good[8], *good[9:]]  # assistant text, then its tool call
    answers = []
    for name, lines in (("apart", good), ("glued", glued)):
        root = new_repo(tmp_path, name)
        (tmp_path / f"{name}.jsonl").write_bytes(b"".join(lines))
        proc = run_engram(root, "ingest", str(tmp_path / f"{name}.jsonl"))
        assert "0 skipped" in proc.stdout, proc.stdout
        answers.append(session_events(root, SPOTTER_MAIN))
    assert answers[1] == answers[0]
    assert any(str(e.get("text", "")).startswith("Let me start by understanding") for e in answers[1])


def test_a_line_with_half_an_emoji_keeps_its_request(spotter: Path, tmp_path: Path) -> None:
    """Claude Code cuts long strings by UTF-16 units and can write the first half of an emoji alone
    (`"\\ud83d"`, a lone surrogate: valid JSON, not valid Unicode). The whole line, a request, was
    skipped as 'malformed JSON line'; it is kept, the half character replaced with U+FFFD."""
    good = (spotter / f"{SPOTTER_MAIN}.jsonl").read_bytes().splitlines(keepends=True)[:60]
    at = next(i for i, line in enumerate(good) if b'"Implement spotter-gqc"' in line)
    good[at] = good[at].replace(b'"Implement spotter-gqc"', b'"Implement spotter-gqc \\ud83d"')
    root = new_repo(tmp_path, "surrogate")
    (tmp_path / "s.jsonl").write_bytes(b"".join(good))
    proc = run_engram(root, "ingest", str(tmp_path / "s.jsonl"))
    assert "0 skipped" in proc.stdout and "malformed" not in proc.stdout, proc.stdout
    assert any(e.get("text") == "Implement spotter-gqc \ufffd" for e in session_events(root, SPOTTER_MAIN))


def test_ingest_of_the_repository_leaves_engrams_own_store_alone(spotter: Path, tmp_path: Path) -> None:
    """`engram ingest .` at the repository's root read `.engram/events/memories/*.jsonl` (the memory
    log) and `.engram/redacted.jsonl` as transcripts: a made-up 'raw' session holding every note and
    the code anchored to it, which explain then gave as a session that discussed that code. The
    store (and `.git/`) is never read as transcripts; the transcripts beside them are."""
    root = new_repo(tmp_path, "self")
    (root / "app.py").write_text("def settle_invoice(ledger):\n    return ledger.close_period()\n")
    run_engram(root, "remember", "settle_invoice closes the period", "--at", "app.py:1-2")
    (root / "logs").mkdir()
    good = (spotter / f"{SPOTTER_MAIN}.jsonl").read_bytes().splitlines(keepends=True)[:60]
    (root / "logs" / "s.jsonl").write_bytes(b"".join(good))
    proc = run_engram(root, "ingest", ".")
    assert "1 session, 1 new tape" in proc.stdout and "plain text" not in proc.stdout, proc.stdout
    tapes = json.loads(run_engram(root, "tapes", "--json").stdout)
    assert [t["session_id"] for t in tapes] == [SPOTTER_MAIN]
    log = next((root / ".engram" / "events" / "memories").glob("*.jsonl"))
    named = run_engram(root, "ingest", str(log))
    assert "engram's own store" in named.stdout + named.stderr, named.stdout + named.stderr
    assert len(json.loads(run_engram(root, "tapes", "--json").stdout)) == 1


def test_a_transcript_whose_name_is_not_utf8_is_skipped_and_said(spotter: Path, tmp_path: Path) -> None:
    """A transcript file named in Latin-1 was a traceback ('surrogates not allowed') that stopped the
    whole ingest; it is skipped with the reason and how to rename it, and the others are captured."""
    root = new_repo(tmp_path, "names")
    src = tmp_path / "src"
    src.mkdir()
    good = (spotter / f"{SPOTTER_MAIN}.jsonl").read_bytes().splitlines(keepends=True)[:60]
    (src / os.fsdecode(b"caf\xe9.jsonl")).write_bytes(b"".join(good))
    (src / "ok.jsonl").write_bytes((spotter / f"{SPOTTER_OTHER}.jsonl").read_bytes())
    proc = run_engram(root, "ingest", str(src))
    assert "Traceback" not in proc.stderr and "1 × a file name that is not UTF-8 (rename it: convmv -f latin1 " \
        "-t utf8 FILE)" in proc.stdout, proc.stdout + proc.stderr[-800:]
    named = run_engram(root, "ingest", str(src / os.fsdecode(b"caf\xe9.jsonl")), check=False)  # (named: refused)
    assert named.returncode == 1 and named.stderr.endswith("caf\ufffd.jsonl: the file's name is not UTF-8; engram "
                                                            "keeps paths as UTF-8 text: rename it (convmv -f latin1 "
                                                            "-t utf8 FILE)\n"), named.stderr[-800:]
    assert [t["session_id"] for t in json.loads(run_engram(root, "tapes", "--json").stdout)] == [SPOTTER_OTHER]


def test_a_codex_call_whose_arguments_hold_half_an_emoji_is_captured(tmp_path: Path) -> None:
    """Codex keeps a tool call's arguments as a JSON string; one holding half an emoji (`\\ud83d`) came
    out of its parse as a lone surrogate, which no tape can hold: the whole ingest stopped on a
    traceback. The call is captured with U+FFFD in its place."""
    fixture = Path(__file__).parent / "fixtures" / "codex" / "codex_small_schema_coverage.jsonl"
    text = fixture.read_text()
    changed = text.replace('"arguments":"{\\"command\\":[\\"ls\\"]}"',
                           '"arguments":"{\\"command\\":[\\"echo\\",\\"half \\\\ud83d emoji\\"]}"', 1)
    assert changed != text
    src = tmp_path / "rollout-2026-08-03T10-48-56-019fc8be.jsonl"
    src.write_text(changed)
    root = new_repo(tmp_path, "cx")
    proc = run_engram(root, "ingest", str(src))
    assert "Traceback" not in proc.stderr and "1 new tape" in proc.stdout, proc.stderr[-800:]
    shown = run_engram(root, "show", json.loads(run_engram(root, "tapes", "--json").stdout)[0]["id"][:12], "--json")
    assert "half \ufffd emoji" in shown.stdout


def test_record_captures_output_and_changed_files(repo: Path) -> None:
    (repo / "keep.py").write_text("def keep():\n    return 1\n")
    (repo / "gone.txt").write_text("bye\n")
    git(repo, "add", "-A")
    script = ("import pathlib; p = pathlib.Path('keep.py'); "
              "p.write_text(p.read_text().replace('return 1', 'return 2')); "
              "pathlib.Path('new.py').write_text('x = 1\\n'); pathlib.Path('gone.txt').unlink(); "
              "print('hello from the command')")
    proc = run_engram(repo, "record", "--", sys.executable, "-c", script)
    assert "hello from the command" in proc.stdout  # the terminal is passed through
    tid = json.loads(run_engram(repo, "tapes", "--json").stdout)[0]["id"]
    evs = shown_events(repo, tid)
    result = next(e for e in evs if e["kind"] == "tool.result")
    assert "hello from the command" in result["stdout"] and result["exit_code"] == 0
    edits = {e["file"]: e for e in evs if e["kind"] == "code.edit"}
    assert edits["keep.py"]["op"] == "update" and edits["keep.py"]["before_range"] == [2, 2]
    assert edits["keep.py"]["before_text"] == "    return 1\n" and edits["keep.py"]["after_text"] == "    return 2\n"
    assert edits["new.py"]["op"] == "create" and edits["new.py"]["after_text"] == "x = 1\n"
    assert edits["gone.txt"]["op"] == "delete" and edits["gone.txt"]["before_text"] == "bye\n"
    failing = run_engram(repo, "record", "--", sys.executable, "-c", "raise SystemExit(3)", check=False)
    assert failing.returncode == 3
    killed = run_engram(repo, "record", "--", "sh", "-c", "kill -TERM $$", check=False)
    assert killed.returncode == 128 + 15, "as a shell says it (sys.exit(-15) was 241)"
    assert "(killed by SIGTERM, exit status 143)" in killed.stderr


def test_record_keeps_its_tape_when_a_file_name_is_not_utf8(repo: Path) -> None:
    """A command that wrote a file named in Latin-1 beside its other changes lost the whole
    recording (a traceback after the command ran: 'surrogates not allowed'). The tape keeps the
    output and the other files' edits, and stderr names the file left out."""
    script = ("import pathlib; pathlib.Path(b'na\\xefve.txt'.decode('latin1').encode('latin1').decode('utf-8', "
              "'surrogateescape')).write_text('x\\n'); pathlib.Path('plain.py').write_text('y = 2\\n'); "
              "print('ran to the end')")
    proc = run_engram(repo, "record", "--", sys.executable, "-c", script)
    assert "Traceback" not in proc.stderr and "ran to the end" in proc.stdout, proc.stderr[-800:]
    assert "na\ufffdve.txt: a file name that is not UTF-8, left out of the tape" in proc.stderr, proc.stderr
    tid = json.loads(run_engram(repo, "tapes", "--json").stdout)[0]["id"]
    evs = shown_events(repo, tid)
    assert [e["file"] for e in evs if e["kind"] == "code.edit"] == ["plain.py"]
    assert "ran to the end" in next(e for e in evs if e["kind"] == "tool.result")["stdout"]


def test_record_keeps_a_symlinks_target_out_of_the_tape(repo: Path, tmp_path: Path) -> None:
    """A symbolic link in the tree is not a file the command changed: a change to the file inside
    the repository it points to is that file's edit alone (it was also an edit of the link), and a
    change to a file outside the repository it points to is not copied into the tape."""
    (repo / "real.py").write_text("x = 1\n")
    (repo / "link.py").symlink_to("real.py")
    outside = tmp_path / "outside-secret.txt"
    outside.write_text("token one\n")
    (repo / "out.txt").symlink_to(outside)
    git(repo, "add", "-A")
    script = ("import pathlib; pathlib.Path('real.py').write_text('x = 2\\n'); "
              f"pathlib.Path({str(outside)!r}).write_text('token two\\n')")
    run_engram(repo, "record", "--", sys.executable, "-c", script)
    tid = json.loads(run_engram(repo, "tapes", "--json").stdout)[0]["id"]
    evs = shown_events(repo, tid)
    assert [e["file"] for e in evs if e["kind"] == "code.edit"] == ["real.py"]
    assert "token one" not in json.dumps(evs)


def test_record_hands_piped_input_to_the_command_to_its_end(repo: Path) -> None:
    """Input from a pipe, a file or /dev/null (a script, CI) reaches the command with its end: the
    command finishes (it waited for more for ever: the input went through the terminal, which never
    ended), and a command that closes its output before it exits is not hung up (SIGHUP, 129)."""
    def record(*cmd: str, data: bytes | None) -> subprocess.CompletedProcess[bytes]:
        try:
            return subprocess.run([sys.executable, "-m", "engram.cli", "record", "--", *cmd], cwd=repo,
                                  input=data, stdin=None if data is not None else subprocess.DEVNULL,
                                  capture_output=True, timeout=30)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"engram record -- {' '.join(cmd)} never ended") from None

    counted = record("sh", "-c", "wc -l", data=b"one\ntwo\nthree\n")
    assert counted.returncode == 0, counted.stderr
    tid = json.loads(run_engram(repo, "tapes", "--json").stdout)[0]["id"]
    result = next(e for e in shown_events(repo, tid) if e["kind"] == "tool.result")
    assert result["stdout"].strip() == "3"
    for data in (None, b"hello\n", None, b"hello\n"):
        done = record("cat", data=data)
        assert done.returncode == 0, done.stderr


def test_record_of_a_command_that_cannot_start_says_so_and_keeps_no_tape(repo: Path) -> None:
    """A mistyped command is one plain error line, exit 1, and no tape: it once forked a second
    engram that printed a coloured error into the output and recorded a tape of nothing."""
    proc = run_engram(repo, "record", "--", "no-such-command-here", "x", check=False)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert proc.stderr.strip() == ("engram: cannot run 'no-such-command-here': no such command on PATH; "
                                   "nothing was recorded")
    assert "\x1b[" not in proc.stdout + proc.stderr
    assert not tapes_on_disk(repo)


def test_a_recorded_change_in_two_places_is_indexed_as_those_places() -> None:
    """`engram record` diffs the tree: a change at both ends of a file is one edit whose texts
    run from the first change to the last, with `hunks` saying where the changes are, so the
    index takes their lines only (not the untouched lines between them)."""
    from engram.index.kinds import carried_runs, edit_texts
    from engram.capture.record import diff_edits

    old = "".join(f"line {i}\n" for i in range(1, 31))
    new = old.replace("line 2\n", "line two\n").replace("line 29\n", "line twenty-nine\n")
    (ev,) = diff_edits({"f.txt": old}, {"f.txt": new}, "2026-01-01T00:00:00Z")
    assert ev["after_range"] == [2, 29] and ev["hunks"] == [[2, 2, 2, 2], [29, 29, 29, 29]]
    assert edit_texts(ev) == ("line 2\nline 29\n", "line two\nline twenty-nine\n")
    assert carried_runs(ev) == [], "a recorded change held nothing but what it changed"
    # A Claude Code Write held the whole new file, but wrote only what it changed: the lines
    # between (all it is known to have held, on a tape without `context`) are carried.
    written = {**ev, "tool": "Write"}
    assert edit_texts(written) == edit_texts(ev)
    assert carried_runs(written) == [(3, 28, "".join(f"line {i}\n" for i in range(3, 29)))]


def test_record_stdin_detects_the_format_and_is_idempotent(spotter: Path, repo: Path) -> None:
    data = (spotter / f"{SPOTTER_MAIN}.jsonl").read_bytes()
    run_engram(repo, "record", "--stdin", input=data)
    run_engram(repo, "record", "--stdin", input=data)
    rows = json.loads(run_engram(repo, "tapes", "--json").stdout)
    assert len(rows) == 1 and rows[0]["session_id"] == SPOTTER_MAIN and rows[0]["edits"] == 48
    raw = run_engram(repo, "record", "--stdin", "--format", "raw", input=b"notes about the parser\n\nmore notes\n")
    assert "note:" not in raw.stdout, "text asked for as text is not warned about as text"
    rows = json.loads(run_engram(repo, "tapes", "--json").stdout)
    assert {r["harness"] for r in rows} == {"claude-code", "raw"}


def test_record_stdin_keeps_a_last_line_without_its_newline(repo: Path) -> None:
    """Standard input at its end is the whole transcript: its last line, without a newline (`printf`,
    an editor's buffer), is kept, not left for a next ingest that never comes (its words were not
    found), and garbage of one line under --format is an error, not 'unchanged' with exit 0."""
    run_engram(repo, "record", "--stdin", "--format", "raw", input=b"first line\nthe parser retries twice")
    hits = run_engram(repo, "search", "retries", "--json").stdout
    assert "the parser retries twice" in hits
    proc = run_engram(repo, "record", "--stdin", "--format", "claude", input=b"zzz not json", check=False)
    assert proc.returncode == 1 and proc.stderr.startswith("engram: nothing recorded: "), proc.stderr


def test_record_stdin_of_garbage_is_an_error_and_keeps_no_tape(repo: Path) -> None:
    """Bytes that are no transcript, a format that does not fit them, or nothing at all: one error
    line, exit 1, and no tape (a wrong --format once kept a tape of nothing but its header)."""
    garbage = bytes(range(256)) * 8
    for args, data, said in ((["--format", "claude"], garbage, "stdin holds no transcript engram reads ("),
                             (["--format", "claude"], b'{"type": "user"}\n', "stdin holds no transcript engram reads ("),
                             ([], garbage, "stdin holds no transcript engram reads ("),
                             ([], b"", "stdin is empty; pipe a transcript into it")):
        proc = subprocess.run([sys.executable, "-m", "engram.cli", "record", "--stdin", *args], cwd=repo,
                              input=data, capture_output=True, timeout=600)
        assert proc.returncode == 1, (args, proc.stdout)
        proc.stderr = proc.stderr.decode()
        (line,) = proc.stderr.splitlines()
        assert line.startswith("engram: nothing recorded: ") and said in line, (args, line)
    assert not tapes_on_disk(repo)


# A session file of a harness with no adapter, shaped as OpenCode's JSON export is (one pretty-printed
# document: info, then messages with typed parts; a tool's input holds the file it wrote).
PARSER = "".join(f"def parse_{n}(line: str) -> list[str]:\n    fields = line.split(',{n}')\n"
                 f"    return [f.strip() for f in fields if f and len(f) > {n}]\n\n" for n in range(8))


def opencode_export(path: str, content: str, secret: str) -> str:
    def part(kind: str, **fields: Any) -> dict[str, Any]:
        return {"type": kind, "id": f"prt_{kind}", **fields}

    return json.dumps({
        "info": {"id": "ses_21fe87b8dffeb4i4", "directory": "/Users/dev/proj", "title": "Parser"},
        "messages": [
            {"info": {"role": "user", "id": "msg_1"}, "parts": [part("text", text="Write a parser for the CSV lines")]},
            {"info": {"role": "assistant", "id": "msg_2"}, "parts": [
                part("tool", tool="write", callID="call_1", state={
                    "status": "completed", "input": {"filePath": path, "content": content},
                    "output": "Wrote file successfully."}),
                part("tool", tool="bash", callID="call_2", state={
                    "status": "completed", "input": {"command": "psql", "password": secret}, "output": ""}),
                part("text", text="The parser splits each line on its field separator."),
            ]},
        ],
    }, indent=2)


def shown_texts(repo: Path, session: str) -> list[str]:
    """The texts of a session's events as `engram show --json` gives them."""
    return [e["text"] for e in shown_events(repo, session) if "text" in e]


def test_json_of_a_harness_without_an_adapter_is_read_as_the_text_it_holds(repo: Path, tmp_path: Path) -> None:
    secret = "correct horse battery staple"
    export = tmp_path / "full.jsonl"
    export.write_text(opencode_export("/Users/dev/proj/parse.py", PARSER, secret))
    out = run_engram(repo, "ingest", str(export)).stdout
    assert "1 file holds no Claude Code or Codex records: read as plain text" in out
    (repo / "parse.py").write_text(PARSER)
    doc = json.loads(run_engram(repo, "explain", "parse.py:5-14", "--brief").stdout)
    top = doc["sessions"][0]
    assert top["harness"] == "raw" and top["session_id"].startswith("raw-")
    # The span is found whole in the text the session wrote: the full weight of a message, where
    # the document's escaped lines (`\n` glued to each next line's first word) matched ~0.6 of it.
    best = max(f["confidence"] for f in top["fragments"])
    assert best == KIND_WEIGHT[KIND_NO[E.MSG_IN]]
    texts = shown_texts(repo, top["session_id"])
    assert PARSER in texts, "the file written is an event of its own, its lines as written"
    assert "Write a parser for the CSV lines" in "\n".join(texts)
    stored = run_engram(repo, "show", top["session_id"], "--raw").stdout
    assert secret not in "\n".join(texts) and secret not in stored, "a value under a secret's key is redacted"
    assert "msg_2" not in stored and "prt_text" not in stored, "ids are not text"


def test_json_lines_of_another_harness_keep_each_record_and_a_broken_line(repo: Path, tmp_path: Path) -> None:
    records = [{"type": "session.start", "data": {"sessionId": "aafa7ee8", "producer": "copilot-agent"}},
               {"type": "user.message", "data": {"content": "Add the parser module"}},
               {"type": "tool.execution_start", "data": {"toolName": "create", "arguments": {
                   "path": "/w/parse.py", "file_text": PARSER}}}]
    lines = [json.dumps(r) for r in records]
    lines.insert(2, '{"type": "assistant.message", "data": {"content": "cut off by a cra')
    session = tmp_path / "events.jsonl"
    session.write_text("\n".join(lines) + "\n")
    run_engram(repo, "ingest", str(session))
    (repo / "parse.py").write_text(PARSER)
    doc = json.loads(run_engram(repo, "explain", "parse.py:17-26", "--brief").stdout)
    assert [s["harness"] for s in doc["sessions"]] == ["raw"]
    texts = shown_texts(repo, doc["sessions"][0]["session_id"])
    assert PARSER in texts
    assert any("Add the parser module" in t for t in texts) and any("cut off by a cra" in t for t in texts)


def test_large_outputs_become_shared_objects_and_gc_keeps_them(repo: Path, tmp_path: Path) -> None:
    big = "line of build output\n" * 20000  # 420 KB, over the 256 KiB threshold
    recs = []
    for n, sid in enumerate(["s-1", "s-2"]):
        base = {"sessionId": sid, "cwd": str(repo), "version": "2.1.39", "timestamp": "2026-01-01T00:00:00Z"}
        recs.append([
            {**base, "type": "assistant", "uuid": f"{sid}-a", "parentUuid": None,
             "message": {"model": "m", "content": [{"type": "tool_use", "id": f"t{n}", "name": "Bash",
                                                    "input": {"command": "make"}}]}},
            {**base, "type": "user", "uuid": f"{sid}-u", "parentUuid": f"{sid}-a",
             "message": {"content": [{"type": "tool_result", "tool_use_id": f"t{n}", "content": big}]},
             "toolUseResult": {"stdout": big, "stderr": "", "interrupted": False}},
        ])
    for sid, rs in zip(["s-1", "s-2"], recs):
        (tmp_path / f"{sid}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rs))
    run_engram(repo, "ingest", str(tmp_path / "s-1.jsonl"), str(tmp_path / "s-2.jsonl"))
    objects = [p for p in (repo / ".engram" / "objects").rglob("*") if p.is_file()]
    assert len(objects) == 1, "the same output stored once"
    orphan = repo / ".engram" / "objects" / "ff" / ("0" * 62)
    orphan.parent.mkdir(parents=True, exist_ok=True)
    orphan.write_bytes(b"junk")
    out = run_engram(repo, "gc").stdout
    assert "removed 1" in out and not orphan.exists() and objects[0].exists()
    shown = shown_events(repo, "s-1")
    assert any(e.get("stdout") == big for e in shown), "objects resolve back to the text"

    # A damaged tape's references cannot be read: gc must not take its objects for orphans.
    orphan.write_bytes(b"junk")
    tape = next((repo / ".engram" / "tapes").glob("*"))
    tape.chmod(0o644)
    tape.write_bytes(tape.read_bytes()[:100])
    proc = run_engram(repo, "gc", check=False)
    assert proc.returncode == 1 and "gc removed nothing" in proc.stderr and "Traceback" not in proc.stderr
    assert objects[0].exists() and orphan.exists()


def test_the_format_is_found_past_a_first_record_longer_than_the_first_read(tmp_path: Path) -> None:
    """detect_format decides on the first 16 KB when a whole record there names the harness and
    reads up to 256 KB otherwise: a long first record, lines of noise and text stay detected."""
    from engram.capture.discovery import detect_format  # noqa: PLC0415

    record = {"type": "user", "sessionId": "s1", "uuid": "u1", "message": {"content": "x"}}
    long_first = {"type": "progress", "data": "y" * 40_000}
    cases = {
        "short.jsonl": (json.dumps(record) + "\n", "claude-code"),
        "long-first.jsonl": (json.dumps(long_first) + "\n" + json.dumps(record) + "\n", "claude-code"),
        "noise-then-meta.jsonl": ("not json\n" * 3000 + json.dumps({"kind": "meta"}) + "\n", "raw"),
        "noise-first.jsonl": ("not json\n" * 5 + json.dumps({"kind": "meta"}) + "\n" + "z" * 20_000, "events"),
        "prose.txt": ("plain words on a line\n" * 2000, "raw"),
    }
    for name, (content, want) in cases.items():
        (tmp_path / name).write_text(content)
        assert detect_format(tmp_path / name) == want, name
    (tmp_path / "junk.bin").write_bytes(bytes(range(256)) * 200)
    assert detect_format(tmp_path / "junk.bin") is None


def test_the_start_a_run_orders_sessions_by_is_the_start_their_tapes_record(
        spotter: Path, claude_schema: Path, repo: Path, tmp_path: Path) -> None:
    """A run captures sessions in `start_hint` order so that it indexes them in the order
    `engram reindex` does (by the catalog's `started`): the two must agree for every format."""
    from engram.capture.discovery import jobs_from_paths, start_hint  # noqa: PLC0415
    from engram.capture.stats import IngestStats  # noqa: PLC0415

    src = tmp_path / "src"
    shutil.copytree(spotter, src / "spotter")
    shutil.copytree(claude_schema, src / "schema")
    shutil.copy(Path(__file__).parent / "fixtures" / "codex" / "codex_small_schema_coverage.jsonl", src)
    run_engram(repo, "ingest", str(src))
    exported = run_engram(repo, "show", SPOTTER_MAIN, "--raw").stdout
    other = new_repo(tmp_path, "other")
    (src / "exported.jsonl").write_text(exported)
    run_engram(other, "ingest", str(src / "exported.jsonl"))

    jobs = jobs_from_paths([src], IngestStats())
    assert {job.harness for job in jobs} == {"claude-code", "codex", "events"}
    for job in jobs:
        root = other if job.harness == "events" else repo
        db = open_db(Store(root))
        started = db.execute("SELECT t.started FROM captures c JOIN tapes t ON t.id = c.tape"
                             " WHERE c.source = 'main' AND c.path = ?", (str(job.main),)).fetchall()
        db.close()
        assert started and started[0][0], f"{job.main.name}: captured with a start time"
        assert start_hint(job) == started[0][0], job.main.name


def test_a_session_recorded_on_windows_lands_on_repository_paths(spotter: Path, tmp_path: Path) -> None:
    """Claude Code on Windows records `D:\\work\\app\\lib\\x.ex`; a teammate's machine, or a
    checkpoint branch, brings that transcript here. Its reads and edits must name the repository's
    files, so that explaining a span of one finds the session."""
    src = spotter / f"{SPOTTER_MAIN}.jsonl"
    cwd = session_cwd(src).rstrip("/")

    def to_windows(m: Any) -> str:
        return "D:\\work\\spotter" + m.group(1).replace("/", "\\")

    pattern = re.compile(re.escape(cwd) + r"((?:/[\w.\-]+)*)")

    def convert(value: Any) -> Any:
        if isinstance(value, str):
            return pattern.sub(to_windows, value)
        if isinstance(value, dict):
            return {k: convert(v) for k, v in value.items()}
        if isinstance(value, list):
            return [convert(v) for v in value]
        return value

    windows = tmp_path / "windows" / f"{SPOTTER_MAIN}.jsonl"
    windows.parent.mkdir()
    lines = [json.dumps(convert(json.loads(ln))) for ln in src.read_text().splitlines() if ln.strip()]
    windows.write_text("\n".join(lines) + "\n")
    assert '"cwd": "D:\\\\work\\\\spotter"' in windows.read_text()

    root = new_repo(tmp_path, "repo")
    created = created_by(spotter, SPOTTER_MAIN)
    for rel, text in created.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    run_engram(root, "ingest", str(windows))

    events = session_events(root, SPOTTER_MAIN)
    code = [e for e in events if e["kind"] in ("code.read", "code.edit")]
    assert len(code) > 50, "the session's reads and edits were lost"
    bad = [e["file"] for e in code if "\\" in e["file"] or ":" in e["file"]]
    assert not bad, f"Windows paths kept as text: {bad[:3]}"
    assert created.keys() <= {e["file"] for e in code if e["kind"] == "code.edit"}

    rel = max(created, key=lambda r: len(created[r].splitlines()))
    doc = json.loads(run_engram(root, "explain", f"{rel}:1-10", "--brief").stdout)
    first = doc["sessions"][0]
    assert first["session_id"] == SPOTTER_MAIN
    assert any(f["kind"] == "code.edit" and f["file"] == rel for f in first["fragments"])


def test_the_summary_counts_every_edit_not_recorded_by_reason_once(tmp_path: Path) -> None:
    """`engram ingest` says what became of edits it could not index: patches whose text the
    transcript lost (counted per file Codex reported), patches no known state of their file
    places (recorded without line ranges). A grown session's next ingest counts only its new
    lines' edits: the earlier ones were reported with the earlier tape."""
    from test_codex import Rollout, custom_ok, patch  # noqa: PLC0415

    root = new_repo(tmp_path, "repo")
    (root / "app.py").write_text("def main():\n    return 0\n")
    git(root, "add", ".")
    git(root, "commit", "-qm", "base")
    head = git(root, "rev-parse", "HEAD").strip()
    r = Rollout().meta(root, head).turn(root)
    r.custom("lost", "[REDACTED]", custom_ok("app.py", "cli.py"))
    r.custom("nowhere", patch("*** Update File: app.py", "@@", "-    x = compute()", "+    x = 2"), custom_ok("app.py"))
    r.custom("fine", patch("*** Update File: app.py", "@@", "-    return 0", "+    return 1"), custom_ok("app.py"))
    path = r.write(tmp_path / "sessions" / "rollout-2025-11-22T20-00-00-019a0000-0000-7000-8000-0000000000aa.jsonl")
    out = run_engram(root, "ingest", str(path)).stdout
    assert "2 edits" in out
    assert "edits: 1 without line ranges" in out, out
    assert "edits: 1 placed by their context" in out, out  # the one after: on the state the session last knew
    assert "edits not recorded: 2 × apply_patch input redacted or unparseable" in out, out
    r.custom("lost-again", "*** Begin Patch\n[REDACTED]\n", custom_ok("app.py"))
    r.write(path)
    again = run_engram(root, "ingest", str(path)).stdout
    assert "1 new tape," in again and "without line ranges" not in again, again
    assert "edits not recorded: 1 × apply_patch input redacted or unparseable" in again, again


# `python -m engram.cli ARGS` with an exit handler that says whether the interpreter's teardown ran.
_TEARDOWN_SEEN = ("import atexit, runpy, sys\natexit.register(lambda: sys.stderr.write('teardown ran\\n'))\n"
                  "sys.argv = ['engram', *sys.argv[1:]]\nrunpy.run_module('engram.cli', run_name='__main__')\n")


def test_ingest_ends_without_teardown_yet_delivers_everything(repo: Path, tmp_path: Path) -> None:
    """`engram ingest` leaves as the queries do (engram.cli.main.exit_process), its summary flushed
    whole through a pipe, its tapes on disk and its index closed (no -wal file left); the
    interpreter's teardown (20-60 ms after the last tape) is skipped. Other commands still end
    normally."""
    from test_store_safety import write_session

    sessions = tmp_path / "sessions"
    sessions.mkdir()
    for i in range(5):
        write_session(sessions / f"s{i}.jsonl", repo, f"s{i}", f"session {i}")
    env = {**os.environ, "PYTHONUNBUFFERED": ""}  # the summary sits in the stream's buffer until the exit
    proc = subprocess.run([sys.executable, "-c", _TEARDOWN_SEEN, "ingest", str(sessions)], cwd=repo,
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "teardown ran" not in proc.stderr
    assert "5 sessions, 5 new tapes" in proc.stdout
    assert len(list((repo / ".engram" / "tapes").glob("*.jsonl.zst"))) == 5
    assert not (repo / ".engram" / "index.sqlite-wal").exists()
    tapes = subprocess.run([sys.executable, "-c", _TEARDOWN_SEEN, "tapes"], cwd=repo, capture_output=True,
                           text=True, env=env, timeout=300)
    assert tapes.returncode == 0 and "teardown ran" in tapes.stderr
