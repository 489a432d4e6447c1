"""Memory embeddings: computing them in batches off the request path, and the matrix recall
multiplies a query by.

Why this way:

- **Vectors are keyed by the content's hash and the model** (`memory_vectors`), not by memory:
  they depend on nothing else, so a rebuild of the projection keeps them, and a memory edited
  back to an earlier text finds its vector again.
- **Embedding is batched, never on remember's path.** Loading the model takes ~0.3 s, one note of
  ~80 tokens 25-30 ms of CPU (one query of 8 tokens ~7): more than remember's 30 ms budget. A new
  memory waits for its vector (`"embedding": "pending"`); a process that has the model loaded
  embeds what waits right after answering (`engram mcp`, the language server's endpoint: after a
  remember or a recall), else `engram memory embed`, the next ingest or reindex does
  (`Memories.embed_pending`, 32 texts a batch, with the cosine half of dedup on write:
  `engram.memory.dedup.check_embedded`). Meanwhile recall finds it by its words and anchors and
  says how many memories have no vector yet.
- **Recall is one matrix product.** Every vector lives in one float32 matrix held by the
  process (`Matrix`, 100,000 memories = 150 MB), with each row's memory number; the query's
  cosine to all of them is `M @ q`. The matrix follows the projection by its change counter
  (`memories.seq`): rows of memories changed since are read again, nothing else.
- **Past PREFILTER_FROM rows, a shortlist first.** `M @ q` reads the whole matrix, 150 MB
  at 100,000 memories: 25-50 ms on the loaded 2-core machine measured, more than recall's 20 ms.
  The matrix then also keeps each row's sign bits around the rows' mean (384 bits, 6 uint64, 4.8
  MB at 100,000, stored word by word) and its projection on LOW_DIMS principal directions (SVD of
  the rows themselves, made once). A query counts the bits each row differs by (XOR, popcount:
  ~1.5 ms), keeps the SHORTLISTED x RESCORED nearest (10,000: a tenth at 100,000), ranks those
  on the principal directions and computes the exact cosines of the RESCORED best from the full
  rows. At 100,000 rows that is 5.0 ms of CPU where the projected product of every row took 7.2
  (bench/README.md, "memory_speed.py"); below PREFILTER_FROM rows the product is the whole
  matrix. Every product runs on the calling thread (`np.einsum`): through BLAS (`@`) one of
  2,000 rows or more is split over both cores, whose threads then spin (1.7x the CPU for the
  projected product of 100,000 rows; 14x for 2,000 full rows, 8.6 against 0.6 ms). The answer is the exact top k unless a true neighbour falls outside
  the shortlist or the RESCORED best of the projection. Measured on MiniLM vectors of LoCoMo's
  2,760 turns and its 760 questions, rescoring 1% of the rows as at 100,000: the exact best answer
  kept for 759 of 760 questions (2%: all), 0.997 of the exact top 10 (the projection alone: the
  same 759, 0.997; the sign bits alone rescoring 5%: 0.995; 128 directions hold 92% of the variance).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from engram.index.sql import immediate
from engram.memory import projection
from engram.memory.vocabulary import KINDS

if TYPE_CHECKING:
    import apsw

log = logging.getLogger(__name__)

DIMS = 384
BATCH = 32
PREFILTER_FROM = 20_000
LOW_DIMS = 128
WORDS = DIMS // 64  # a row's sign bits: 6 uint64
SHORTLISTED = 10  # x RESCORED: the rows the sign bits keep for the projected product
RESCORED = 1_000

_asked = threading.Event()  # this process asked for the model (so it is loaded, or known missing)


def model_key() -> str:
    """What `memory_vectors.model` records: vectors of another model are never compared."""
    from engram.memory import embed  # noqa: PLC0415

    return str(getattr(embed, "MODEL_SHA256", "minilm"))[:16]


def embedder(load: bool = True) -> Any:
    """The process's embedder, or None when the model cannot run here. With `load` false, only
    one that is loaded already (nothing is loaded for a memory written from the command line)."""
    if not load and not _asked.is_set():
        return None
    from engram.memory.embed import Embedder  # noqa: PLC0415

    _asked.set()
    return Embedder.shared()


def status() -> tuple[bool, str]:
    """(the model runs here, what it is or why not): how recall says whether the dense channel ran."""
    from engram.memory.embed import model_status  # noqa: PLC0415

    return model_status()


def pending(db: apsw.Connection, limit: int | None = None, hashes: list[str] | None = None) -> list[tuple[str, str]]:
    """(hash, content) of memories whose content has no vector of the current model yet (of
    those with `hashes` only, when given: no scan of the table)."""
    only = " AND m.hash IN (SELECT value FROM json_each(?))" if hashes is not None else ""
    sql = ("SELECT DISTINCT m.hash, m.content FROM memories m LEFT JOIN memory_vectors v ON v.hash = m.hash"
           f" AND v.model = ? WHERE v.hash IS NULL{only} ORDER BY m.no")
    args: list[Any] = [model_key()]
    if hashes is not None:
        args.append(_json_list(hashes))
    if limit is not None:
        sql += " LIMIT ?"
        args.append(limit)
    return [(h, c) for h, c in db.execute(sql, args)]


def count_pending(db: apsw.Connection) -> int:
    return int(db.execute("SELECT count(*) FROM memories m WHERE NOT EXISTS (SELECT 1 FROM memory_vectors v"
                          " WHERE v.hash = m.hash AND v.model = ?)", (model_key(),)).fetchall()[0][0])


def embed_pending(db: apsw.Connection, *, load: bool = True, limit: int | None = None,
                  hashes: list[str] | None = None,
                  judge: Callable[[list[str], np.ndarray], None] | None = None) -> int:
    """Embed memories that have no vector yet (of those with `hashes`, when given), BATCH at a
    time; returns how many. Nothing (0) when the model cannot run here, or with `load` false when
    it is not loaded already. `judge(hashes, vectors)` sees each batch before it is stored (the
    cosine half of dedup: `Memories.embed_pending`, which every caller that has a store uses)."""
    model = embedder(load)
    if model is None:
        return 0
    done = 0
    todo = pending(db, limit, hashes)
    for i in range(0, len(todo), BATCH):
        batch = todo[i:i + BATCH]
        vecs = model.embed([c for _, c in batch])
        if judge is not None:
            judge([h for h, _ in batch], vecs)
        keep(db, [(h, vecs[j]) for j, (h, _) in enumerate(batch)])  # (marks the memories changed)
        done += len(batch)
    return done


def keep(db: apsw.Connection, pairs: list[tuple[str, np.ndarray]]) -> None:
    """Store vectors computed already ((content hash, vector) each): memories whose content they
    are read them at the next refresh of a matrix."""
    key = model_key()
    with immediate(db):
        db.executemany("INSERT OR REPLACE INTO memory_vectors(hash, model, vec) VALUES(?, ?, ?)",
                       ((h, key, np.ascontiguousarray(v, dtype=np.float32).tobytes()) for h, v in pairs))
        seq = int(projection.state(db, "seq", 0)) + 1
        hashes = _json_list([h for h, _ in pairs])
        db.execute("UPDATE memories SET seq = ? WHERE hash IN (SELECT value FROM json_each(?))", (seq, hashes))
        # with its vector, a memory's cosine dedup is done (or was not asked for: projection.VECTOR_DEDUP)
        db.execute("DELETE FROM memory_state WHERE key >= ? AND key < ? AND value IN"
                   " (SELECT no FROM memories WHERE hash IN (SELECT value FROM json_each(?)))",
                   (*projection.UNCHECKED_KEYS, hashes))
        db.execute("INSERT OR REPLACE INTO memory_state(key, value) VALUES('seq', ?)", (seq,))


def _json_list(values: list[str]) -> str:
    import orjson  # noqa: PLC0415

    return orjson.dumps(values).decode()


class Matrix:
    """Every memory's vector in one float32 matrix, kept in step with the projection.

    Rows are never removed: a memory forgotten, or whose content changed and has no vector yet,
    keeps its row with `live` false. `rows` maps a memory number to its row; `active` and `kinds`
    say per row what recall filters on, so a filtered recall is still one product."""

    def __init__(self, prefilter_from: int = PREFILTER_FROM, rescored: int = RESCORED,
                 shortlisted: int = SHORTLISTED) -> None:
        self.prefilter_from, self.rescored, self.shortlisted = prefilter_from, rescored, shortlisted
        self.basis: np.ndarray | None = None  # (DIMS, LOW_DIMS) once the matrix is that large
        self.low = np.zeros((0, LOW_DIMS), dtype=np.float32)
        self.center = np.zeros(DIMS, dtype=np.float32)  # the rows' mean (their sign bits are taken around it)
        self.codes = np.zeros((WORDS, 0), dtype=np.uint64)  # each row's sign bits, word-major (see `_hamming`)
        self.epoch = ""
        self.seq = -1
        self.dropped = -1
        self.key = ""
        self.vecs = np.zeros((0, DIMS), dtype=np.float32)
        self.nos = np.zeros(0, dtype=np.int64)
        self.live = np.zeros(0, dtype=bool)
        self.active = np.zeros(0, dtype=bool)
        self.kinds = np.zeros(0, dtype=np.int8)
        self.n = 0
        self.rows: dict[int, int] = {}
        self.lock = threading.Lock()
        self.usable = np.zeros(0, dtype=bool)  # live & active, kept by `refresh` (what recall searches)
        self.all_usable = True  # every row usable: no mask to apply
        self._waiting = 0

    def refresh(self, db: apsw.Connection) -> None:
        """Read what changed in the projection since the last refresh (everything after a rebuild)."""
        epoch, seq, key = projection.epoch(db), int(projection.state(db, "seq", 0)), model_key()
        if (epoch, seq, key) == (self.epoch, self.seq, self.key):
            return
        with self.lock:
            if epoch != self.epoch or key != self.key:
                self.__init__(self.prefilter_from, self.rescored, self.shortlisted)  # type: ignore[misc]
                self.epoch, self.key = epoch, key
            changed = db.execute(
                "SELECT m.no, m.status, m.kind, v.vec FROM memories m LEFT JOIN memory_vectors v"
                " ON v.hash = m.hash AND v.model = ? WHERE m.seq > ?", (key, self.seq)).fetchall()
            changed.sort()  # (no ORDER BY: it would read the table in rowid order instead of the seq index)
            self._put(changed)
            dropped = int(projection.state(db, "dropped", 0))
            if dropped != self.dropped:
                self._drop_gone(db)
                self.dropped = dropped
            self.seq = seq
            if self.basis is None and self.n >= self.prefilter_from:
                self._project()
            live, active = self.live[:self.n], self.active[:self.n]
            self.usable = live & active
            self.all_usable = bool(self.usable.all())
            self._waiting = int((active & ~live).sum())

    def _put(self, changed: list[tuple[int, str, str, bytes | None]]) -> None:
        for no, status, kind, blob in changed:
            row = self.rows.get(no)
            if row is None:
                row = self._grow()
                self.rows[no] = row
                self.nos[row] = no
            self.active[row] = status == "active"
            self.kinds[row] = KIND_CODES.get(kind, -1)
            if blob is None:
                self.live[row] = False
            else:
                self.vecs[row] = np.frombuffer(blob, dtype=np.float32)
                self.live[row] = True
                if self.basis is not None:
                    self.low[row] = self.vecs[row] @ self.basis
                    self.codes[:, row] = signs(self.vecs[row] - self.center)

    def _project(self) -> None:
        """From 5,000 of the rows, their principal directions and their mean (~0.5 s); then every
        row on those directions and its sign bits around the mean."""
        live = np.flatnonzero(self.live[:self.n])
        sample = self.vecs[live[np.linspace(0, len(live) - 1, min(len(live), 5_000)).astype(np.int64)]]
        _, _, vt = np.linalg.svd(sample, full_matrices=False)
        self.basis = np.ascontiguousarray(vt[:LOW_DIMS].T, dtype=np.float32)
        self.center = sample.mean(axis=0).astype(np.float32)
        self.low = _grown(np.zeros((0, LOW_DIMS), dtype=np.float32), len(self.nos), 0)
        self.codes = np.zeros((WORDS, len(self.nos)), dtype=np.uint64)
        for start in range(0, self.n, 10_000):
            end = min(self.n, start + 10_000)
            self.low[start:end] = self.vecs[start:end] @ self.basis
            self.codes[:, start:end] = signs(self.vecs[start:end] - self.center).T

    def _shortlist(self, q: np.ndarray, n: int, mask: np.ndarray | None) -> np.ndarray:
        """The rows (of the first n, of `mask` when given) whose exact cosines are computed: the
        `shortlisted` x `rescored` nearest by sign bits (a tenth of 100,000 rows), then the
        `rescored` best of those on the principal directions (see the module docstring)."""
        assert self.basis is not None
        near = self._hamming(q, n)
        if mask is not None:
            near[~mask] = DIMS + 1
        # every row within the distance that takes in `short` of them: ties kept, rows in order (a
        # count of each distance, not a partition of 100,000 values: 0.6 against 2-3 ms)
        short = self.shortlisted * self.rescored
        limit = int(np.searchsorted(np.cumsum(np.bincount(near, minlength=DIMS + 2)), short))
        rows = np.flatnonzero(near <= min(limit, DIMS))
        rough = np.einsum("ij,j->i", self.low[rows], q @ self.basis)  # (einsum: see `top`)
        if len(rows) > self.rescored:
            rows = rows[np.argpartition(rough, len(rows) - self.rescored)[len(rows) - self.rescored:]]
        return rows

    def _hamming(self, q: np.ndarray, n: int) -> np.ndarray:
        """Each of the first n rows' count of sign bits that differ from the query's (uint16): one
        XOR and popcount per 64-bit word, word by word over contiguous columns (6x faster than
        row-major at 100,000 rows)."""
        qc = signs(q - self.center)
        out = np.bitwise_count(self.codes[0, :n] ^ qc[0]).astype(np.uint16)
        for w in range(1, WORDS):
            out += np.bitwise_count(self.codes[w, :n] ^ qc[w])
        return out

    def _grow(self) -> int:
        if self.n == len(self.nos):
            cap = max(1024, 2 * self.n)
            if self.basis is not None:
                self.low = _grown(self.low, cap, self.n)
                self.codes = np.ascontiguousarray(_grown(self.codes.T, cap, self.n).T)
            self.vecs = _grown(self.vecs, cap, self.n)
            self.nos = _grown(self.nos, cap, self.n)
            self.live = _grown(self.live, cap, self.n)
            self.active = _grown(self.active, cap, self.n)
            self.kinds = _grown(self.kinds, cap, self.n)
        self.n += 1
        return self.n - 1

    def _drop_gone(self, db: apsw.Connection) -> None:
        """Rows of memories no longer in the projection (forgotten) are not live."""
        if not self.n:
            return
        present = np.fromiter((r[0] for r in db.execute("SELECT no FROM memories")), dtype=np.int64)
        keep = np.isin(self.nos[:self.n], present)
        self.live[:self.n] &= keep
        self.active[:self.n] &= keep

    def top(self, query: np.ndarray, k: int, *, hidden: bool = False, kind: str | None = None
            ) -> list[tuple[int, float]]:
        """(memory no, cosine) of the k rows nearest `query`, best first. Only active memories
        unless `hidden`; only those of `kind` when given."""
        if self.n == 0 or k <= 0:
            return []
        q = query.astype(np.float32)
        with self.lock:
            n = min(self.n, len(self.usable))  # (rows added since the last refresh: not searched yet)
            everything = self.all_usable and not hidden and kind is None
            mask = self.live[:n].copy() if hidden else self.usable[:n].copy()
            if kind is not None:
                mask &= self.kinds[:n] == KIND_CODES.get(kind, -2)
            k = min(k, n if everything else int(mask.sum()))
            if k <= 0:
                return []
            if self.basis is not None and n > self.rescored:
                rows = self._shortlist(q, n, None if everything else mask)
                exact = np.einsum("ij,j->i", self.vecs[rows], q)
            else:
                # einsum, not `@`: BLAS splits a product of 2,000 rows or more over every core and its
                # threads spin on after it (at 2,000 rows, 8.6 ms of the process's CPU against 0.6)
                rows = np.flatnonzero(mask)
                exact = np.einsum("ij,j->i", self.vecs[:n], q)[rows]
            nos = self.nos[rows]
        k = min(k, len(rows))
        best = np.argpartition(-exact, k - 1)[:k]
        best = best[np.lexsort((nos[best], -exact[best]))]
        return [(int(nos[i]), float(exact[i])) for i in best]

    def cosines(self, query: np.ndarray, nos: list[int]) -> dict[int, float]:
        """memory no -> cosine to `query`, for those of `nos` that have a vector: the dense
        channel's score of candidates another channel found (recall scores them all alike)."""
        with self.lock:
            rows = [(no, r) for no in nos if (r := self.rows.get(no)) is not None and self.live[r]]
            if not rows:
                return {}
            sims = self.vecs[np.fromiter((r for _, r in rows), dtype=np.int64, count=len(rows))] @ \
                query.astype(np.float32)
        return {no: float(x) for (no, _), x in zip(rows, sims, strict=True)}

    def waiting(self) -> int:
        """Active memories without a vector of the current model (not embedded yet), as of the last refresh."""
        return self._waiting

    def vector(self, no: int) -> np.ndarray | None:
        row = self.rows.get(no)
        return self.vecs[row] if row is not None and self.live[row] else None


KIND_CODES = {k: i for i, k in enumerate(KINDS)}


def signs(x: np.ndarray) -> np.ndarray:
    """The sign bits of a vector (WORDS uint64) or of rows of vectors ((rows, WORDS))."""
    return np.packbits(x > 0, axis=-1).view(np.uint64)


def _grown(a: np.ndarray, cap: int, n: int) -> np.ndarray:
    out = np.zeros((cap, *a.shape[1:]), dtype=a.dtype)
    out[:n] = a[:n]
    return out
