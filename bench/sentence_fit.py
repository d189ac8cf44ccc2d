"""Fitting the extractive answer's sentence choice and the refusal gate on the tuning parts.

The quality benchmark (bench/quality.py) measures whether an extractive answer
holds the set's answer string; this script turns its two tuning parts (`tune`,
`tune2`; never `held`, `held2` or `held3`) into training data for the choice
(engine/rag/answer/sentence_choice.py) and the gate (engine/rag/answer/refusal.py):

    python -m bench.sentence_fit collect --index DIR --out FILE
        each tuning question through the product's retrieval (RelevanceGate.search,
        the words no chunk holds), its passages and every sentence vector kept
    python -m bench.sentence_fit dump --records FILE --out FILE.csv
        one row per candidate sentence of an answerable question: its features as
        the product computes them (ExtractiveAnswerer.table) and whether what the
        answer would show with it chosen (the sentence and its quotation) holds the
        answer string
    python -m bench.sentence_fit_model --records FILE
        the choice and the gate fitted on one part and measured on the other, both
        ways, against the weights in the code; then fitted on both parts

Answers are replayed offline: the product's ExtractiveAnswerer and gate over the kept
passages, with the kept vectors, so a replay with the code's weights is the
benchmark's figures for these parts.
"""

from __future__ import annotations

import argparse
import csv
import pickle
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bench.quality import TOP_K, contains, load_set
from engine.environ import EngineEnviron
from engine.rag.answer.content_words import content_words
from engine.rag.answer.extractive import DEFAULT_MIN_SCORE, ExtractiveAnswerer
from engine.rag.answer.passages import Passage
from engine.rag.answer.refusal import refused
from engine.rag.answer.sentence_choice import CHOICE_WEIGHTS, FEATURES, ChoiceWeights

TUNING = ("tune", "tune2")


@dataclass(frozen=True, kw_only=True)
class Record:
    """One tuning question's retrieval, enough to replay its answer offline."""

    id: str
    split: str
    question: str
    answer: str  # "" when unanswerable
    passages: tuple[Passage, ...]
    similarity: float  # the best hit's (the gate reads no sentence under NOT_FOUND_SIMILARITY)
    checked: bool  # the gate read its sentences
    unknown: tuple[str, ...]  # the question's words no chunk holds
    vectors: dict[str, np.ndarray]  # every text the answer embeds (the question's too)

    @property
    def answerable(self) -> bool:
        return bool(self.answer)


@dataclass(frozen=True, kw_only=True)
class Replayed:
    record: Record
    refused: bool
    contains: bool
    score: float | None  # the gate's relevance of the answer sentence


def collect(*, index: Path, say: Callable[[str], None]) -> list[Record]:
    from engine.paths import resolve_paths
    from engine.rag.ingest.embedder import Embedder
    from engine.rag.pipeline.adapters import passages_of
    from engine.rag.pipeline.answering import RelevanceGate, _checked
    from engine.rag.pipeline.requests import Question
    from engine.rag.store.lance_store import LanceStore

    questions = [q for q in load_set() if q.split in TUNING]
    assert not any(q.held_out for q in questions)
    embedder = Embedder(
        environ=EngineEnviron.from_environ(), cache_dir=resolve_paths().cache / "embedders"
    )
    seen: dict[str, np.ndarray] = {}

    def recording(texts: list[str]) -> np.ndarray:
        rows = np.asarray(embedder.embed(texts), dtype=np.float32)
        seen.update(zip(texts, rows, strict=True))
        return rows

    store = LanceStore(scorer=EngineEnviron.from_environ().ivf_scorer, folder=index)
    out = []
    try:
        say(f"{store.counts()[1]} chunks in {index}; {len(questions)} tuning questions")
        gate = RelevanceGate(store=store, embed=embedder.embed)
        answerer = ExtractiveAnswerer(embed=recording)
        for q in questions:
            (searched,) = gate.search([Question(request_id=q.id, text=q.question, k=TOP_K)])
            hits = searched.hits
            passages = tuple(passages_of(hits))
            checked = _checked(hits)
            unknown = gate.unknown(question=q.question, searched=searched) if checked else ()
            seen.clear()
            if checked:
                answerer.answer(question=q.question, passages=list(passages))
            out.append(
                Record(
                    id=q.id,
                    split=q.split,
                    question=q.question,
                    answer=q.answer,
                    passages=passages,
                    similarity=max((h.similarity for h in hits), default=0.0),
                    checked=checked,
                    unknown=unknown,
                    vectors=dict(seen),
                )
            )
    finally:
        store.close()
    return out


def answerer_for(record: Record, *, weights: ChoiceWeights = CHOICE_WEIGHTS) -> ExtractiveAnswerer:
    """The product's answerer over the record's kept vectors (no embedder needed)."""

    def embed(texts: list[str]) -> np.ndarray:
        return np.stack([record.vectors[t] for t in texts])

    # The gate's threshold is applied by `replay`, as RelevanceGate.judge does.
    return ExtractiveAnswerer(embed=embed, weights=weights, min_score=DEFAULT_MIN_SCORE)


def replay(
    records: Sequence[Record],
    *,
    weights: ChoiceWeights = CHOICE_WEIGHTS,
    gate: Callable[[Record, float], bool] | None = None,
) -> list[Replayed]:
    """Each record's answer as the product gives it with `weights`; `gate(record,
    score)` says whether an answer sentence of relevance `score` is refused (default:
    the product's gate, engine/rag/answer/refusal.py)."""
    out = []
    for r in records:
        if not r.checked:
            out.append(Replayed(record=r, refused=True, contains=False, score=None))
            continue
        extract = answerer_for(r, weights=weights).answer(
            question=r.question, passages=list(r.passages)
        )
        if not extract.found:
            out.append(Replayed(record=r, refused=True, contains=False, score=None))
            continue
        no = (
            gate(r, extract.score)
            if gate is not None
            else refused(score=extract.score, unknown=r.unknown, min_score=DEFAULT_MIN_SCORE)
        )
        out.append(
            Replayed(
                record=r,
                refused=no,
                contains=not no and r.answerable and contains(extract.text, r.answer),
                score=extract.score,
            )
        )
    return out


def totals(replayed: Sequence[Replayed]) -> dict[str, int]:
    """Counts, not shares: the parts are small and a share hides how few moved."""
    answerable = [x for x in replayed if x.record.answerable]
    unanswerable = [x for x in replayed if not x.record.answerable]
    return {
        "answerable": len(answerable),
        "contains": sum(x.contains for x in answerable),
        "answerable_refused": sum(x.refused for x in answerable),
        "unanswerable": len(unanswerable),
        "unanswerable_refused": sum(x.refused for x in unanswerable),
    }


@dataclass(frozen=True, kw_only=True)
class Candidates:
    """One answerable question's candidate sentences: features and labels."""

    record: Record
    features: np.ndarray  # (sentences, FEATURES)
    labels: np.ndarray  # bool: what the answer shows with it chosen holds the string


def candidates(records: Sequence[Record]) -> list[Candidates]:
    out = []
    for r in records:
        if not (r.answerable and r.checked):
            continue
        table = answerer_for(r).table(question=r.question, passages=list(r.passages))
        if table is None:
            continue
        labels = np.array([contains(table.shown(i), r.answer) for i in range(len(table.where))])
        out.append(Candidates(record=r, features=table.features, labels=labels))
    return out


def dump(records: Sequence[Record], *, out: Path) -> int:
    rows = 0
    with out.open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["id", "split", "sentence", *FEATURES, "label"])
        for c in candidates(records):
            for i, (row, label) in enumerate(zip(c.features, c.labels, strict=True)):
                writer.writerow(
                    [c.record.id, c.record.split, i, *(f"{v:.5f}" for v in row), int(label)]
                )
                rows += 1
    return rows


def passage_share(record: Record) -> float:
    """The largest share of the question's content words one passage holds."""
    wanted = set(content_words(record.question))
    if not wanted or not record.passages:
        return 0.0
    return max(len(wanted & set(content_words(p.text))) / len(wanted) for p in record.passages)


def load_records(path: Path) -> list[Record]:
    class Unpickler(pickle.Unpickler):
        def find_class(self, module: str, name: str) -> object:
            # Records collected before `__main__` went through the module's name.
            return super().find_class(__name__ if module == "__main__" else module, name)

    with path.open("rb") as f:
        return Unpickler(f).load()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.sentence_fit")
    sub = parser.add_subparsers(dest="command", required=True)
    c = sub.add_parser("collect")
    c.add_argument("--index", type=Path, required=True, help="an index of the real documents")
    c.add_argument("--out", type=Path, required=True)
    d = sub.add_parser("dump")
    d.add_argument("--records", type=Path, required=True)
    d.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)

    def say(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    if args.command == "collect":
        records = collect(index=args.index, say=say)
        args.out.write_bytes(pickle.dumps(records))
        say(f"{len(records)} records in {args.out}")
        return 0
    records = load_records(args.records)
    say(f"{dump(records, out=args.out)} sentences in {args.out}")
    return 0


if __name__ == "__main__":
    # Through the module's own name, so that pickled Records load from anywhere.
    from bench.sentence_fit import main as run_main

    raise SystemExit(run_main())
