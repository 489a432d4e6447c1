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


def test_tapes_written_for_later_are_invisible_until_published_and_share_one_directory_sync(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What a capture worker leaves (a temp file) is no tape until the ingest process publishes
    it; tapes published together cost one sync of their directory, not one each."""
    from engram.tape import writer

    tapes, objects = tmp_path / "tapes", tmp_path / "objects"
    meta = {"kind": "meta", "harness": "test", "session_id": "s"}
    written = [writer.write_tape(tapes, objects, [meta, {"kind": "msg.out", "text": f"tape {i}"}], publish_later=True)
               for i in range(3)]
    assert writer.tape_files(tapes) == [] and all(w.pending is not None and w.created for w in written)
    dirs: list[str] = []
    real = os.fsync

    def fsync(fd: int) -> None:
        if os.path.isdir(f"/proc/self/fd/{fd}"):
            dirs.append(os.readlink(f"/proc/self/fd/{fd}"))
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    writer.publish_tapes(written)
    assert dirs == [str(tapes)]
    assert writer.tape_files(tapes) == sorted(w.path for w in written)
    for w in written:
        with TapeReader(w.path) as r:
            assert r.id == w.id and len(r) == 2
    assert [p.name for p in tapes.iterdir() if p.name.startswith(".tmp-")] == []
