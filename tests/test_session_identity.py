"""Which session a tape belongs to: the one whose records the file holds, not its first line's.

Claude Code starts a file with another session's records in two cases (records shaped as in real
2.1 sessions, marot/spotter's and FSM1/cipher-box's): a session implementing a plan accepted with
"clear context" starts with the planning session's last line, and `--resume`/`--continue` write a
new file that repeats the resumed session's records, with their `sessionId`, before its own.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from conftest import run_engram
from engram.capture.discovery import jobs_from_paths, start_hint
from engram.capture.stats import IngestStats
from engram.index.db import open_db
from engram.store.repo import Store

PLANNER = "6f0d3a52-6a41-4d51-9d8e-1f3f2b8a9c01"
IMPLEMENTER = "9b1e7c44-2f0a-4e8e-bb3d-55c0a1d2e3f4"
ORIGINAL = "0c2d4e6f-8a9b-4c1d-9e2f-3a4b5c6d7e8f"
RESUMED = "f1e2d3c4-b5a6-4978-8695-a4b3c2d1e0f9"

GREETER = "defmodule Greeter do\n  @moduledoc false\n\n  def hello(name) do\n    \"hello \" <> name\n  end\n\n" \
          "  def goodbye(name) do\n    \"goodbye \" <> name\n  end\nend\n"
PARSER = "defmodule Spotter.Transcripts.Parser do\n  @moduledoc \"Reads session files line by line.\"\n\n" \
         "  def parse(path) do\n    path\n    |> File.stream!()\n    |> Stream.map(&Jason.decode!/1)\n" \
         "    |> Enum.reject(&progress?/1)\n  end\n\n  defp progress?(%{\"type\" => \"progress\"}), do: true\n" \
         "  defp progress?(_), do: false\nend\n"


class Session:
    """Writes records in the envelope Claude Code 2.1 gives them (see tests/fixtures/claude)."""

    def __init__(self, session: str, cwd: Path, start: int) -> None:
        self.session, self.cwd, self.t = session, cwd, start  # seconds after 2026-02-11T00:00
        self.records: list[dict[str, Any]] = []
        self.parent: str | None = None
        self.n = 0

    def _rec(self, typ: str, **fields: Any) -> dict[str, Any]:
        self.n += 1
        self.t += 2
        uuid = f"{self.session[:8]}-{self.n:04d}-4000-8000-{self.n:012d}"
        rec = {"parentUuid": self.parent, "isSidechain": False, "userType": "external", "cwd": str(self.cwd),
               "sessionId": self.session, "version": "2.1.39", "gitBranch": "main", "slug": "modular-petting-thompson",
               "type": typ, **fields, "uuid": uuid,
               "timestamp": f"2026-02-11T{self.t // 3600:02d}:{self.t // 60 % 60:02d}:{self.t % 60:02d}.000Z"}
        self.parent = uuid
        self.records.append(rec)
        return rec

    def prompt(self, text: str, **extra: Any) -> None:
        self._rec("user", message={"role": "user", "content": text}, **extra)

    def reply(self, text: str) -> None:
        self._rec("assistant", message={"model": "claude-opus-4-6", "id": f"msg_{self.n}", "type": "message",
                                        "role": "assistant", "content": [{"type": "text", "text": text}]})

    def write(self, rel: str, content: str) -> None:
        call = f"toolu_{self.session[:8]}{self.n:04d}"
        path = str(self.cwd / rel)
        self._rec("assistant", message={"model": "claude-opus-4-6", "id": f"msg_{self.n}", "type": "message",
                                        "role": "assistant", "content": [{"type": "tool_use", "id": call, "name": "Write",
                                                                          "input": {"file_path": path, "content": content}}]})
        self._rec("user", message={"role": "user", "content": [
            {"tool_use_id": call, "type": "tool_result", "content": f"File created successfully at: {path}"}]},
            toolUseResult={"type": "create", "filePath": path, "content": content, "structuredPatch": [],
                           "originalFile": None})

    def edit(self, rel: str, before: str, old: str, new: str) -> str:
        call = f"toolu_{self.session[:8]}{self.n:04d}"
        path = str(self.cwd / rel)
        after = before.replace(old, new)
        line = before[: before.index(old)].count("\n") + 1
        n_old, n_new = old.count("\n") + 1, new.count("\n") + 1
        self._rec("assistant", message={"model": "claude-opus-4-6", "id": f"msg_{self.n}", "type": "message",
                                        "role": "assistant", "content": [{"type": "tool_use", "id": call, "name": "Edit",
                                                                          "input": {"file_path": path, "old_string": old,
                                                                                    "new_string": new,
                                                                                    "replace_all": False}}]})
        self._rec("user", message={"role": "user", "content": [
            {"tool_use_id": call, "type": "tool_result", "content": f"The file {path} has been updated successfully."}]},
            toolUseResult={"filePath": path, "oldString": old, "newString": new, "originalFile": before,
                           "structuredPatch": [{"oldStart": line, "oldLines": n_old, "newStart": line, "newLines": n_new,
                                                "lines": [f"-{x}" for x in old.split("\n")]
                                                + [f"+{x}" for x in new.split("\n")]}],
                           "userModified": False, "replaceAll": False})
        return after

    def progress_hook(self, hook: str) -> None:
        """The SessionStart hook's progress record a new session's file starts with."""
        self._rec("progress", data={"type": "hook_progress", "hookEvent": "SessionStart", "hookName": hook,
                                    "command": "entire hooks claude-code session-start"},
                  parentToolUseID="toolu_hook", toolUseID="toolu_hook")

    def save(self, folder: Path, records: list[dict[str, Any]] | None = None) -> Path:
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{self.session}.jsonl"
        path.write_text("".join(json.dumps(r, separators=(",", ":")) + "\n"
                                for r in (records if records is not None else self.records)))
        return path


def explain_sessions(repo: Path, span: str) -> list[str]:
    doc = json.loads(run_engram(repo, "explain", span, "--brief").stdout)
    return [s["session_id"] for s in doc["sessions"]]


def listed_sessions(repo: Path) -> list[str]:
    return sorted({t["session_id"] for t in json.loads(run_engram(repo, "tapes", "--json").stdout)})


def continuation_edges(repo: Path) -> list[tuple[str, str, str | None]]:
    db = open_db(Store(repo))
    try:
        return sorted(db.execute("SELECT a.session_id, b.session_id, c.marker FROM continuations c "
                                 "JOIN tapes a ON a.no = c.src_tape JOIN tapes b ON b.no = c.dst_tape").fetchall())
    finally:
        db.close()


def plan_pair(repo: Path) -> tuple[Session, Session]:
    """A planning session that wrote lib/greeter.ex and planned the parser, and the session that
    implemented the plan after "clear context": its file starts with the planner's last line."""
    planner = Session(PLANNER, repo, 20 * 3600)
    planner.prompt("Add a greeter module, then plan a parser for session files")
    planner.write("lib/greeter.ex", GREETER)
    planner.reply("Here is the plan.")
    planner.prompt("[Request interrupted by user for tool use]")
    implementer = Session(IMPLEMENTER, repo, 20 * 3600 + 120)
    implementer.progress_hook("SessionStart:clear")
    implementer.prompt("<local-command-caveat>Caveat: The messages below were generated by the user while running "
                       "local commands.</local-command-caveat>", isMeta=True)
    implementer.prompt("Implement the following plan:\n\n# Plan: a parser for session files\n\nRead JSONL, skip progress.",
                       planContent="# Plan: a parser for session files\n\nRead JSONL, skip progress.")
    implementer.write("lib/parser.ex", PARSER)
    implementer.reply("The parser is in place.")
    implementer.records.insert(0, planner.records[-1])  # the copied line, with the planner's sessionId
    return planner, implementer


def test_a_plan_implementation_session_keeps_its_own_id_and_edits(repo: Path, tmp_path: Path) -> None:
    planner, implementer = plan_pair(repo)
    (repo / "lib").mkdir()
    (repo / "lib" / "greeter.ex").write_text(GREETER)
    (repo / "lib" / "parser.ex").write_text(PARSER)
    impl_file = implementer.save(tmp_path / "s")
    run_engram(repo, "ingest", str(impl_file))  # alone first: its first line is the planner's
    assert listed_sessions(repo) == [IMPLEMENTER]

    assert explain_sessions(repo, "lib/parser.ex:4-9") == [IMPLEMENTER]

    planner.save(tmp_path / "s")  # the planning session, captured after the session it handed over to
    run_engram(repo, "ingest", str(tmp_path / "s"))
    assert listed_sessions(repo) == sorted([PLANNER, IMPLEMENTER])
    assert explain_sessions(repo, "lib/parser.ex:4-9") == [IMPLEMENTER]
    assert explain_sessions(repo, "lib/greeter.ex:4-10") == [PLANNER]
    meta = json.loads(run_engram(repo, "show", IMPLEMENTER, "--json").stdout)["events"][0]
    assert meta["started"] == implementer.records[2]["timestamp"]  # its own first record's, not the copied line's
    assert (meta["continues"], meta["continues_via"]) == (PLANNER, "plan")
    assert continuation_edges(repo) == [(PLANNER, IMPLEMENTER, "plan")]
    run_engram(repo, "reindex")  # in time order: the planner first
    assert continuation_edges(repo) == [(PLANNER, IMPLEMENTER, "plan")]


def test_a_plan_implementation_session_names_its_planner_by_transcript_path(repo: Path, tmp_path: Path) -> None:
    """Claude Code 2.1 ends the handed-over plan with the planning session's transcript path; a
    session that copied no line of it is still linked to it."""
    planner, implementer = plan_pair(repo)
    del implementer.records[0]  # no copied line this time
    prompt = next(r for r in implementer.records if r.get("planContent"))
    prompt["message"]["content"] += ("\n\nIf you need specific details from before exiting plan mode (like exact code "
                                     "snippets, error messages, or content you generated), read the full transcript at: "
                                     f"/home/dev/.claude/projects/-home-dev-proj/{PLANNER}.jsonl")
    planner.save(tmp_path / "s")
    implementer.save(tmp_path / "s")
    run_engram(repo, "ingest", str(tmp_path / "s"))
    assert listed_sessions(repo) == sorted([PLANNER, IMPLEMENTER])
    assert continuation_edges(repo) == [(PLANNER, IMPLEMENTER, "plan")]


def test_a_resumed_session_and_its_original_are_two_tapes_linked(repo: Path, tmp_path: Path) -> None:
    """`claude --resume` wrote a new file: the original's records, then the resumed session's own.
    Both are tapes; the original's edit is evidence once, for the original; the resumed one's
    edit is its own; a continuation edge joins them, whichever is captured first."""
    original = Session(ORIGINAL, repo, 20 * 3600)
    original.prompt("Write a parser for session files")
    original.write("lib/parser.ex", PARSER)
    original.reply("Done: lib/parser.ex reads the file and drops progress records.")
    for i in range(30):  # a long conversation: the copy is longer than the head a run reads to order sessions
        original.prompt(f"Question {i} about the parser")
        original.reply(f"Answer {i}: it streams the file.")
    resumed = Session(RESUMED, repo, 21 * 3600)
    resumed.prompt("Also skip file-history-snapshot records")
    after = resumed.edit("lib/parser.ex", PARSER, "  defp progress?(_), do: false",
                         "  defp progress?(%{\"type\" => \"file-history-snapshot\"}), do: true\n"
                         "  defp progress?(_), do: false")
    resumed.reply("Snapshots are skipped too.")
    resumed.records[0]["parentUuid"] = original.records[-1]["uuid"]
    (repo / "lib").mkdir()
    (repo / "lib" / "parser.ex").write_text(after)
    resumed_file = resumed.save(tmp_path / "s", original.records)  # just resumed: nothing of its own yet
    alone = run_engram(repo, "ingest", str(resumed_file)).stdout  # Claude Code may have deleted the original
    assert "note: 1 session file repeats 64 records of 1 other session" in alone
    assert f"1 of those is not captured here (their own files were not ingested; Claude Code deletes old ones): " \
           f"{ORIGINAL}" in alone
    assert "1 session, 0 new tapes" in alone  # no record of its own: nothing to tape yet
    resumed.save(tmp_path / "s", original.records + resumed.records)
    assert "1 new tape," in run_engram(repo, "ingest", str(resumed_file)).stdout  # its own records, appended
    assert listed_sessions(repo) == [RESUMED]

    original.save(tmp_path / "s")
    out = run_engram(repo, "ingest", str(tmp_path / "s")).stdout
    assert "2 sessions, 1 new tape," in out and "(1 session unchanged)" in out
    assert listed_sessions(repo) == sorted([ORIGINAL, RESUMED])
    assert explain_sessions(repo, "lib/parser.ex:1-9") == [ORIGINAL]
    assert explain_sessions(repo, "lib/parser.ex:12-14")[0] == RESUMED
    tapes = {t["session_id"]: t for t in json.loads(run_engram(repo, "tapes", "--json").stdout)}
    assert tapes[ORIGINAL]["edits"] == 1 and tapes[RESUMED]["edits"] == 1  # the copy is not counted again
    assert tapes[RESUMED]["started"] == resumed.records[0]["timestamp"]
    assert continuation_edges(repo) == [(ORIGINAL, RESUMED, "resume")]
    jobs = jobs_from_paths([tmp_path / "s"], IngestStats())  # a run orders sessions by the start their tapes record
    assert {job.main.stem: start_hint(job) for job in jobs} == {s: tapes[s]["started"] for s in (ORIGINAL, RESUMED)}

    again = run_engram(repo, "ingest", str(tmp_path / "s")).stdout
    assert "0 new tapes" in again and "(2 sessions unchanged)" in again
