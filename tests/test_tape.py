"""Reading tapes: windows through the seek table, and damage noticed even after a cached read."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from engram.errors import CorruptTape
from engram.tape.events import dumps
from engram.tape.reader import TapeReader
from engram.tape.writer import encode_tape


def _tape(path: Path, n: int) -> list[bytes]:
    lines = [dumps({"kind": "meta", "harness": "test", "session_id": "s"})]
    lines += [dumps({"kind": "msg.out", "text": f"event {i} " + "word " * 40}) for i in range(1, n)]
    path.write_bytes(encode_tape(lines, frame_bytes=4096))
    return lines


def test_windows_cross_frames_and_a_damaged_frame_is_never_answered_from_memory(tmp_path: Path) -> None:
    path = tmp_path / "t.tape"
    lines = _tape(path, 400)
    with TapeReader(path) as r:
        assert len(r.frames) > 10 and len(r) == 400
        win = r.window(200, 3, 3)
        assert [off for off, _ in win] == list(range(197, 204))
        assert [dumps(ev) for _, ev in win] == lines[197:204]
        f = r.frames[r._frame_of(200)]
    with TapeReader(path) as r:  # a second reader in the process: the same events
        assert [dumps(ev) for _, ev in r.window(200, 3, 3)] == lines[197:204]
    data = bytearray(path.read_bytes())
    data[f.offset + f.size // 2] ^= 0xFF  # damage the frame in place, same size
    path.write_bytes(bytes(data))
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    with TapeReader(path) as r, pytest.raises(CorruptTape):
        r.window(200, 3, 3)
