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
