"""`engram setup cursor|vscode|roo|cline`: Engram's MCP server merged into each editor agent's MCP
configuration, and `--remove` taking exactly it out again."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import run_engram


@pytest.mark.parametrize(("agent", "rel", "key"), [("cursor", ".cursor/mcp.json", "mcpServers"),
                                                  ("vscode", ".vscode/mcp.json", "servers"),
                                                  ("roo", ".roo/mcp.json", "mcpServers")])
def test_setup_adds_the_server_beside_the_users_own_and_remove_restores_the_file(repo: Path, agent: str, rel: str,
                                                                                key: str) -> None:
    path = repo / rel
    path.parent.mkdir()
    mine = {key: {"other": {"command": "other-server"}}}
    path.write_text(json.dumps(mine, indent=1))
    run_engram(repo, "setup", agent)
    servers = json.loads(path.read_text())[key]
    assert servers["other"] == {"command": "other-server"}
    assert servers["engram"]["args"][-1] == "mcp"
    assert (agent == "vscode") == (servers["engram"].get("type") == "stdio")
    run_engram(repo, "setup", "--remove", agent)
    assert json.loads(path.read_text()) == mine


def test_cline_is_set_up_in_its_settings_file(repo: Path, tmp_path: Path) -> None:
    env = {"VSCODE_APPDATA": str(tmp_path / "appdata")}
    run_engram(repo, "setup", "cline", env=env)
    settings = tmp_path / "appdata" / "Code" / "User" / "globalStorage" / "saoudrizwan.claude-dev" / "settings" / \
        "cline_mcp_settings.json"
    assert json.loads(settings.read_text())["mcpServers"]["engram"]["disabled"] is False
    run_engram(repo, "setup", "--remove", "cline", env=env)
    assert not settings.exists()  # it held only Engram's entry


def test_doctor_checks_every_agent_that_setup_configured_and_names_the_fix(repo: Path, tmp_path: Path) -> None:
    """Each agent `engram setup` configured gets its lines in `engram doctor`: ok while the engram
    it runs answers, fail (naming the file and `engram setup AGENT`) once that engram is gone, and a
    warning when Gemini CLI has the server but lost its capture hooks. Agents never set up add nothing."""
    from test_cli import doctor

    env = {"HOME": str(tmp_path / "home"), "VSCODE_APPDATA": str(tmp_path / "appdata"),
           "XDG_CONFIG_HOME": str(tmp_path / "config"), "GEMINI_CLI_HOME": str(tmp_path / "home"),
           "CLAUDE_CONFIG_DIR": str(tmp_path / "claude"), "CODEX_HOME": str(tmp_path / "codex")}
    _, checks = doctor(repo, env)
    assert not {"gemini", "qwen", "opencode", "cursor", "vscode", "cline", "roo"} & set(checks)
    agents = ("gemini", "qwen", "opencode", "cursor", "vscode", "cline", "roo")
    for agent in agents:
        run_engram(repo, "setup", agent, env=env)
    code, checks = doctor(repo, env)
    for agent in agents:
        assert [c["status"] for c in checks[agent]] == ["ok"], checks[agent]
    assert "AfterAgent, PreCompress, SessionEnd hooks" in checks["gemini"][0]["detail"]
    assert "Stop, PreCompact, SessionEnd hooks" in checks["qwen"][0]["detail"]
    assert str(repo / "opencode.json") in checks["opencode"][0]["detail"]
    assert "engram-capture.js (capture plugin)" in checks["opencode"][0]["detail"]

    # Gemini CLI's hooks gone, Cursor's engram gone (a deleted virtual environment).
    settings = repo / ".gemini" / "settings.json"
    doc = json.loads(settings.read_text())
    del doc["hooks"]
    settings.write_text(json.dumps(doc))
    cursor = repo / ".cursor" / "mcp.json"
    doc = json.loads(cursor.read_text())
    doc["mcpServers"]["engram"] = {"command": str(tmp_path / "gone" / "engram"), "args": ["mcp"]}
    cursor.write_text(json.dumps(doc))
    code, checks = doctor(repo, env)
    assert code == 1
    assert checks["gemini"][0] == {"area": "gemini", "status": "warn", "fix": "engram setup gemini",
                                   "detail": "Gemini CLI has Engram's MCP server but not its capture hooks"}
    [failed] = checks["cursor"]
    assert failed["status"] == "fail" and failed["fix"] == "engram setup cursor"
    assert str(cursor) in failed["detail"] and "does not exist" in failed["detail"]

    for agent in agents:
        run_engram(repo, "setup", "--remove", agent, env=env)
    _, checks = doctor(repo, env)
    assert not set(agents) & set(checks)


def test_qwen_code_s_stop_hook_captures_the_session(repo: Path, tmp_path: Path) -> None:
    """`engram setup qwen` adds Qwen Code's hooks (Claude Code's format in `.qwen/settings.json`);
    the Stop hook's command, given the payload Qwen Code sends (`transcript_path`), captures the
    session; `setup --remove qwen` takes server and hooks out."""
    import shlex
    import subprocess
    import time

    run_engram(repo, "setup", "qwen")
    settings = json.loads((repo / ".qwen" / "settings.json").read_text())
    assert set(settings["hooks"]) == {"Stop", "PreCompact", "SessionEnd"}
    command = settings["hooks"]["Stop"][0]["hooks"][0]["command"]
    transcript = tmp_path / "q-9.jsonl"
    transcript.write_text(json.dumps({"sessionId": "q-9", "cwd": str(repo), "uuid": "u1", "parentUuid": None,
                                      "type": "user", "timestamp": "2026-05-02T09:00:00Z",
                                      "message": {"role": "user", "parts": [{"text": "hello"}]}}) + "\n")
    payload = {"session_id": "q-9", "transcript_path": str(transcript), "cwd": str(repo), "hook_event_name": "Stop",
               "timestamp": "2026-05-02T09:00:01Z"}
    hook = subprocess.run(shlex.split(command), input=json.dumps(payload), text=True, capture_output=True,
                          cwd=repo, timeout=60)
    assert hook.returncode == 0, hook.stderr
    deadline, tapes = time.monotonic() + 120, []
    while time.monotonic() < deadline and not tapes:
        time.sleep(0.5)
        tapes = json.loads(run_engram(repo, "tapes", "--json").stdout)
    assert [t["session_id"] for t in tapes] == ["q-9"]
    run_engram(repo, "setup", "--remove", "qwen")
    assert not (repo / ".qwen" / "settings.json").exists()
