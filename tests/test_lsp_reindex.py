"""A rebuild another process makes under a running language server (issue 50 point 5): the server
notices the new index epoch and recomputes its documents, and an answer read mid-rebuild says it is
partial."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

from pytest_lsp import LanguageClient

from conftest import run_engram
from test_lsp import client, lenses, open_doc, spot, start  # noqa: F401 - fixtures

FILE = "lib/spotter/services/transcript_renderer.ex"


async def test_a_reindex_from_the_command_line_brings_the_lenses_back(client: LanguageClient,  # noqa: F811
                                                                       spot: Path) -> None:  # noqa: F811
    await start(client, spot)
    uri = open_doc(client, spot / FILE)
    for _ in range(300):
        if await lenses(client, uri):
            break
        await asyncio.sleep(0.1)
    assert await lenses(client, uri)
    client.indexed.clear()  # type: ignore[attr-defined]
    proc = await asyncio.to_thread(subprocess.run, [sys.executable, "-m", "engram.cli", "reindex"], cwd=spot,
                                   capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    for _ in range(300):
        if client.indexed:  # type: ignore[attr-defined]
            break
        await asyncio.sleep(0.1)
    assert client.indexed, "the server noticed the rebuild and recomputed its documents"  # type: ignore[attr-defined]
    assert await lenses(client, uri)


def test_an_answer_read_while_a_reindex_refills_the_index_says_it_is_partial(spot: Path) -> None:  # noqa: F811
    from engram.index.db import open_db
    from engram.index.memo import REBUILDING
    from engram.store.repo import Store

    assert "partial" not in json.loads(run_engram(spot, "explain", f"{FILE}:1-20").stdout)
    db = open_db(Store(spot))
    db.execute("INSERT OR REPLACE INTO state(key, value) VALUES(?, '1')", (REBUILDING,))
    try:
        doc = json.loads(run_engram(spot, "explain", f"{FILE}:1-20").stdout)
        assert "being rebuilt" in doc["partial"]
    finally:
        db.execute("DELETE FROM state WHERE key = ?", (REBUILDING,))
        db.close()
