"""`ragdoll bench conversation --set blind`: follow-ups in four languages, on documents
the follow-up detector was never tuned on.

The set (bench/sets/conversations_blind.json) is two-turn conversations over the blind
corpus of bench/blind_docs.py, in German, French, Spanish and English: a second turn
that leans on the first ("Und wie mache ich das wieder rückgängig?", "Et pour le
clavier ?", "¿Cómo lo inicializo la primera vez?"), or one that asks a new subject
after an unrelated first turn ("standalone": it should be judged standalone and find
its own page). Each turn goes through the product's path without a model: the first
asked alone, the second resolved against it (engine/rag/answer/conversation.py
`resolve`, the detector `looks_dependent`) and searched through the relevance gate
(`RelevanceGate`: the history-aware search, the bonuses, the gate), as
`Engine.ask_stream` does. The index is built as `ragdoll bench quality --set blind`
builds it (`--embedder`, `--index`).

Reported per language and kind: the second turn's right file (and page) first and in
the top 3, the same asked alone, refused, and the detector's verdict (a follow-up
taken for one, a standalone turn taken for standalone); "leaned": judged standalone
but the earlier question weighed in its search (`lean` > 0).

`--ablate` measures again with each rule switched off alone (`RULES`): a rule of the
detector by emptying its word list (the verdicts change; the searches of the turns
whose verdict did not are reused), a part of the history-aware search by setting its
bonus or search to nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.answer_match import contains

SET_FILE = Path(__file__).with_name("sets") / "conversations_blind.json"
TOP = 3
K = 5  # the sources a question is given, as the product's default


@dataclass(frozen=True, kw_only=True)
class BlindTurns:
    id: str
    language: str
    kind: str  # "follow_up" | "standalone"
    file: str
    pages: tuple[int, ...] | None  # None: a file without pages
    first: str
    second: str
    answer: str
    also: tuple[str, ...] = ()  # other files that answer the second turn


def load_set(*, file: Path = SET_FILE) -> list[BlindTurns]:
    rows = json.loads(file.read_text(encoding="utf-8"))["rows"]
    return [
        BlindTurns(
            id=r["id"],
            language=r["language"],
            kind=r["kind"],
            file=r["file"],
            pages=None if r["pages"] is None else tuple(r["pages"]),
            first=r["first"],
            second=r["second"],
            answer=r["answer"],
            also=tuple(r.get("also", ())),
        )
        for r in rows
    ]


# Each rule switched off alone: (module, attribute, value) set for the run. The
# detector's rules are its word lists (engine/rag/answer/conversation_dependence.py);
# "detector" takes every second turn for standalone (searched as asked and hedged by
# `lean`); the rest are the history-aware search's parts (engine/rag/pipeline/adapters.py,
# conversation.py). The rules the first blind run removed (openers, possessives,
# "former"/"latter", demonstratives, a verb phrase left out, few content words, the
# section-title and weak-cited bonuses) are in docs/benchmarks.md, not here.
_DEP = "engine.rag.answer.conversation_dependence"
_ADAPT = "engine.rag.pipeline.adapters"
_CONV = "engine.rag.answer.conversation"
RULES: dict[str, tuple[tuple[str, str, Any], ...]] = {
    "closers": ((_DEP, "_CLOSERS", ()),),
    "pronouns": ((_DEP, "_PRONOUNS", frozenset()),),
    "one/thing stand-ins": ((_DEP, "_ONES", frozenset()), (_DEP, "_THINGS", frozenset())),
    "detector": ((_DEP, "looks_dependent", None), (_CONV, "looks_dependent", None)),
    "hedge (lean)": ((_ADAPT, "lean", None),),
    "cited/file bonuses": ((_ADAPT, "_favour_cited", None),),
    "also searches": ((_CONV, "_also_searches", None),),
    # The gate reads a second turn judged standalone with the earlier question only
    # from GATE_LEAN on; off: always.
    "gate's lean threshold": (("engine.rag.pipeline.answering", "GATE_LEAN", 0.0),),
}
DETECTOR_RULES = frozenset(
    name for name, sets in RULES.items() if all(m in (_DEP, _CONV) for m, _, _ in sets)
) - {"also searches"}


def _off(attribute: str) -> Any:
    """What a function-valued rule is replaced by when switched off."""
    if attribute == "looks_dependent":
        return lambda question: False
    if attribute == "lean":
        return lambda *, alone, with_history: 0.0
    if attribute == "_favour_cited":
        return lambda *, hits, question, scale=1.0: list(hits)
    if attribute == "_also_searches":
        return lambda *, question, referents, last: ()
    raise ValueError(attribute)


@contextlib.contextmanager
def switched_off(rule: str | None) -> Iterator[None]:
    """The product with `rule` (a RULES key; None: nothing) switched off for the block."""
    import importlib

    saved: list[tuple[Any, str, Any]] = []
    try:
        for module_name, attribute, value in RULES[rule] if rule else ():
            module = importlib.import_module(module_name)
            saved.append((module, attribute, getattr(module, attribute)))
            setattr(module, attribute, _off(attribute) if value is None else value)
        yield
    finally:
        for module, attribute, value in reversed(saved):
            setattr(module, attribute, value)


def run(args: argparse.Namespace) -> dict[str, Any]:
    from bench.blind_docs import find_blind_docs
    from bench.quality import indexed_with

    say = (lambda *_: None) if args.json else (lambda m: print(m, file=sys.stderr, flush=True))
    corpus = find_blind_docs()
    if corpus is None:
        raise SystemExit("the blind documents are not there: `python -m bench.blind_docs`")
    if args.index is None:
        raise SystemExit("--set blind needs --index DIR (the blind corpus's index, kept there)")
    turns = load_set()
    if args.language:
        turns = [t for t in turns if t.language in set(args.language.split(","))]
    model, sentences, ingest = indexed_with(
        corpus=corpus, index=args.index, embedder=args.embedder, say=say
    )
    rules: list[str | None] = [None]
    if args.ablate:
        wanted = list(RULES) if args.ablate == "all" else args.ablate.split(",")
        unknown = sorted(set(wanted) - set(RULES))
        if unknown:
            raise SystemExit(f"unknown rules: {', '.join(unknown)} (known: {', '.join(RULES)})")
        rules += wanted
    rewriter = None
    if args.model is not None:
        rewriter = _model_rewriter(Path(args.model))
        say(f"follow-ups rewritten by {Path(args.model).name}")
    try:
        figures = measure(
            index=args.index,
            turns=turns,
            model=model,
            sentences=sentences,
            rules=rules,
            say=say,
            rewrite=rewriter.rewrite if rewriter is not None else None,
        )
    finally:
        if rewriter is not None:
            rewriter.close()
    figures["ingest"] = ingest
    figures["embedder"] = model.info.id
    if not args.json:
        print(report(figures))
    return figures


def measure(
    *,
    index: Path,
    turns: list[BlindTurns],
    model: Any,
    sentences: Any,
    rules: list[str | None],
    say: Callable[[str], None],
    rewrite: Callable[[str, tuple[Any, ...]], str] | None = None,
) -> dict[str, Any]:
    """Each rule's run; with `rewrite` (a language model's rewrite of a follow-up into a
    standalone query), two runs more: "model, as the product" rewrites the follow-ups the
    detector judges dependent (engine/rag/pipeline/follow_up.py `needs_rewrite`), "model,
    every follow-up" rewrites every second turn."""
    from bench.quality import ordinary_words
    from engine.environ import EngineEnviron
    from engine.rag.answer.conversation import resolve, rewritten
    from engine.rag.answer.extractive import DEFAULT_MIN_SCORE
    from engine.rag.pipeline.answer_stream import citation_for
    from engine.rag.pipeline.answering import RelevanceGate, refusal_text
    from engine.rag.pipeline.requests import Question
    from engine.wire import Turn

    store = _store(index=index, scorer=EngineEnviron.from_environ().ivf_scorer)
    gate = RelevanceGate(
        store=store,
        embed=model.embed,
        min_score=DEFAULT_MIN_SCORE,
        sentence_embed=sentences.embed,
        sentence_scale=sentences.semantic_scale,
        ordinary_word=ordinary_words(model),
        small_ordinary=ordinary_words(model, small=True),
    )

    def ask(question: Question) -> tuple[Any, float]:
        (searched,) = gate.search([question])
        return gate.judge(question, searched), searched.leaned

    started = time.perf_counter()
    try:
        firsts: dict[str, Any] = {}
        alone: dict[str, Any] = {}
        asked_alone: list[dict[str, Any]] = []
        for t in turns:
            gated, _ = ask(Question(request_id=f"{t.id}-1", text=t.first, k=K))
            found = gated.found
            asked_alone.append(
                {"id": t.id, "turn": 1, "language": t.language, "refused": not found} | _why(gated)
            )
            firsts[t.id] = Turn(
                question=t.first,
                answer=gated.extract.text
                if found and gated.extract is not None
                else refusal_text(hits=gated.hits, unknown=gated.unknown),
                citations=[citation_for(i + 1, h) for i, h in enumerate(gated.hits)]
                if found
                else [],
            )
            alone[t.id], _ = ask(Question(request_id=f"{t.id}-a", text=t.second, k=K))
            if t.kind == "standalone":
                refused = not alone[t.id].found
                quoted = alone[t.id].extract.text if not refused else ""
                asked_alone.append(
                    {
                        "id": t.id,
                        "turn": 2,
                        "language": t.language,
                        "refused": refused,
                        "holds": bool(t.answer) and contains(quoted, t.answer),
                    }
                    | _why(alone[t.id])
                )
        say(f"first turns and second turns alone: {time.perf_counter() - started:.0f} s")
        runs: dict[str, Any] = {}
        # A detector rule changes verdicts only: a turn whose verdict is the same is
        # searched as before.
        cache: dict[tuple[str, bool], tuple[Any, float]] = {}
        for rule in rules:
            began = time.perf_counter()
            rows = []
            with switched_off(rule):
                for t in turns:
                    follow = resolve(question=t.second, history=(firsts[t.id],))
                    if follow is None:
                        raise RuntimeError("a first turn with no question")
                    key = (t.id, follow.dependent)
                    reuse = rule is None or rule in DETECTOR_RULES
                    if reuse and key in cache:
                        gated, leaned = cache[key]
                    else:
                        question = Question(
                            request_id=f"{t.id}-2", text=follow.query, k=K, conversation=follow
                        )
                        gated, leaned = ask(question)
                        if reuse:
                            cache[key] = (gated, leaned)
                    rows.append(
                        _row(
                            turn=t,
                            gated=gated,
                            alone=alone[t.id],
                            dependent=follow.dependent,
                            leaned=leaned,
                        )
                    )
            name = rule or "product"
            runs[name] = {"rows": rows, "scores": _scores(rows)}
            say(f"{name}: {time.perf_counter() - began:.0f} s")
        if rewrite is not None:
            began = time.perf_counter()
            written = {}
            for t in turns:
                follow = resolve(question=t.second, history=(firsts[t.id],))
                if follow is None:
                    raise RuntimeError("a first turn with no question")
                text = rewrite(t.second, (firsts[t.id],)).strip().splitlines()
                written[t.id] = (follow, text[0] if text else "")
            say(f"rewrites: {time.perf_counter() - began:.0f} s")
            for name, every in (("model, as the product", False), ("model, every follow-up", True)):
                rows = []
                for t in turns:
                    follow, query = written[t.id]
                    if every or follow.dependent:
                        follow = rewritten(follow_up=follow, query=query)
                    question = Question(
                        request_id=f"{t.id}-2", text=follow.query, k=K, conversation=follow
                    )
                    gated, leaned = ask(question)
                    row = _row(
                        turn=t,
                        gated=gated,
                        alone=alone[t.id],
                        dependent=follow.dependent,
                        leaned=leaned,
                    )
                    rows.append(row | {"query": follow.query})
                runs[name] = {"rows": rows, "scores": _scores(rows)}
    finally:
        store.close()
    return {
        "top": TOP,
        "k": K,
        "runs": runs,
        "questions_alone": _refusals(asked_alone),
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "cpus": os.cpu_count(),
        "seconds": round(time.perf_counter() - started, 1),
    }


@dataclass(frozen=True, kw_only=True)
class _ModelRewriter:
    """A language model opened as the engine opens it, writing follow-up rewrites with
    the product's request (`rewrite_request`: its instructions and prompt)."""

    used: Any

    def rewrite(self, question: str, history: tuple[Any, ...]) -> str:
        answerer = self.used.answerer
        request = answerer.rewrite_request(question=question, history=history)
        ids = [event.token_id for event in answerer.stream_batch(requests=[request])]
        return str(answerer.tokenizer.decode(ids, skip_special_tokens=True))

    def close(self) -> None:
        self.used.close()


def _model_rewriter(path: Path) -> _ModelRewriter:
    from engine.rag.answer.in_use import open_model
    from engine.runtime.models.resolve import resolve_model_path

    return _ModelRewriter(used=open_model(model_path=resolve_model_path(model=str(path))))


def _store(*, index: Path, scorer: Any) -> Any:
    from engine.rag.store.lance_store import LanceStore

    return LanceStore(scorer=scorer, folder=index)


def _rank(turn: BlindTurns, hits: Any) -> int | None:
    for i, hit in enumerate(hits[:K]):
        name = Path(hit.chunk.path).name
        if name in turn.also or (
            name == turn.file and (turn.pages is None or hit.chunk.page in turn.pages)
        ):
            return i + 1
    return None


def _row(
    *, turn: BlindTurns, gated: Any, alone: Any, dependent: bool, leaned: float
) -> dict[str, Any]:
    return {
        "id": turn.id,
        "language": turn.language,
        "kind": turn.kind,
        "rank": _rank(turn, gated.hits),
        "rank_alone": _rank(turn, alone.hits),
        "refused": not gated.found,
        "dependent": dependent,
        "leaned": round(leaned, 3),
        "top": [
            Path(h.chunk.path).name + (f" p.{h.chunk.page}" if h.chunk.page else "")
            for h in gated.hits[:TOP]
        ],
    }


def _scores(rows: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for language in [*sorted({r["language"] for r in rows}), "all"]:
        for kind in ("follow_up", "standalone"):
            part = [r for r in rows if r["kind"] == kind and language in ("all", r["language"])]
            if not part:
                continue
            right_verdict = sum(r["dependent"] == (kind == "follow_up") for r in part)
            out[f"{language}/{kind}"] = {
                "n": len(part),
                "first": sum(r["rank"] == 1 for r in part),
                "top3": sum(r["rank"] is not None and r["rank"] <= TOP for r in part),
                "top3_alone": sum(
                    r["rank_alone"] is not None and r["rank_alone"] <= TOP for r in part
                ),
                "refused": sum(r["refused"] for r in part),
                "right_verdict": right_verdict,
                "leaned": sum(not r["dependent"] and r["leaned"] > 0 for r in part),
            }
    return out


def _why(gated: Any) -> dict[str, Any]:
    """The gate's score of a question's best sentence (None: no passage was close
    enough to read) and the words it found no chunk holds."""
    score = gated.extract.score if gated.extract is not None else None
    return {"score": score, "unknown": list(gated.unknown)}


def _refusals(asked: list[dict[str, Any]]) -> dict[str, Any]:
    """Per language, the questions that need no earlier turn (every first turn and each
    new-subject second turn, asked alone): all answerable, so each refusal is a wrong one."""
    out: dict[str, Any] = {}
    for language in [*sorted({a["language"] for a in asked}), "all"]:
        part = [a for a in asked if language in ("all", a["language"])]
        judged = [a for a in part if "holds" in a]
        out[language] = {
            "n": len(part),
            "refused": sum(a["refused"] for a in part),
            # Each refusal with the gate's score and the words it took for never mentioned.
            "refused_ids": [
                f"{a['id']}/{a['turn']} {a['score']} {','.join(a['unknown'])}"
                for a in part
                if a["refused"]
            ],
            # New-subject second turns carry an answer string; first turns do not.
            "quote_holds": sum(a["holds"] for a in judged),
            "quoted_of": len(judged),
        }
    return out


def report(figures: dict[str, Any]) -> str:
    alone = figures.get("questions_alone", {})
    lines = [
        "answerable questions asked alone (first turns, new-subject second turns), refused: "
        + ", ".join(f"{lang} {s['refused']}/{s['n']}" for lang, s in alone.items()),
        "new-subject second turns asked alone, the quote holds the answer: "
        + ", ".join(f"{lang} {s['quote_holds']}/{s['quoted_of']}" for lang, s in alone.items()),
        f"second turn's right file/page (top {figures['top']} of {figures['k']}), "
        f"load {figures['load_average']}",
        "run | lang/kind | n | first | top3 | top3 alone | refused | right verdict | leaned",
    ]
    for name, run in figures["runs"].items():
        for key, s in run["scores"].items():
            lines.append(
                f"{name} | {key} | {s['n']} | {s['first']} | {s['top3']} | {s['top3_alone']} | "
                f"{s['refused']} | {s['right_verdict']} | {s['leaned']}"
            )
    return "\n".join(lines)
