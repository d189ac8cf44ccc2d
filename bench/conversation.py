"""`ragdoll bench conversation`: does a follow-up find what it refers to?

Two-turn conversations over real documents (bench/conversation_set.py): the
first question is asked alone, the follow-up with the first turn as its history, both
through the engine's own answering path (`Engine.ask_stream`: the retrieval pipeline,
the relevance gate, the history-aware search), in extractive mode (no language model).
A follow-up counts as found when one of its top 3 sources is the right file and, for
files with pages, one of the right pages. The same follow-ups asked without their
history are the baseline: they mean little alone. The parts are reported apart:
the tuned conversations, the held-out ones of the first set (set aside before the
search was tuned, then measured over several rounds) and a second held-out set
(bench/conversation_set2.py), with a second and a third tuning set beside it
(the third, bench/conversation_set3.py, written for the follow-up detector), and a
fourth (bench/conversation_set4.py: follow-ups phrased many ways, and second
turns that change the subject, "switch4", found when their own page is in the top 3),
and a fifth (bench/conversation_set5.py, "tuned5": follow-ups as people type them);
a third held-out set (bench/conversation_set6.py, "held_out3") was written after
the others had been measured, blind to the product's results, and a fourth
(bench/conversation_set7.py, "held_out4") likewise after held_out3 was spent,
a fifth (bench/conversation_set8.py, "held_out5") after held_out4, a sixth
(bench/conversation_set9.py, "held_out6") after held_out5, a seventh
(bench/conversation_set10.py, "held_out7") after held_out6, and an eighth
(bench/conversation_set11.py, "held_out8") after held_out7.
Two more counts sit beside each part's: a follow-up written out in full by hand
(bench/conversation_rewrites.py; tuning parts and spent sets) asked alone, how far
a perfect rewrite gets; and the same answer stated in the other bash manual's page
counting as found (bench/conversation_also.py; the strict count is the headline).
`--parts` asks only some parts (the tuning ones while tuning). The report
lists the tuning parts' misses only: the held-out rows are in the figures (`--out`),
not printed, so that tuning does not read them. The other direction, questions that
stand alone asked after an unrelated turn, is bench/conversation_standalone.py
(the first set's conversations only, so that its pairings stay as they were).

The documents are every file of the real-docs corpus (RAGDOLL_REAL_DOCS,
bench/real_docs.py): the ones the questions are about and the others beside
them, as in a person's library. They are indexed into a fresh data folder, or into
`--home`, which keeps them for the next run.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import conversation_standalone
from bench.conversation_also import found_also, load_also
from bench.conversation_rewrites import load_rewrites
from bench.conversation_set import (
    CONVERSATIONS,
    FILES,
    HELD_OUT2,
    HELD_OUT3,
    HELD_OUT4,
    HELD_OUT5,
    HELD_OUT6,
    HELD_OUT7,
    HELD_OUT8,
    SWITCHES4,
    TUNING2,
    TUNING3,
    TUNING4,
    TUNING5,
    TwoTurns,
)
from bench.real_docs import find_real_docs
from engine.wire import CitationsEvent, DoneEvent, Turn

TOP = 3
# The parts beyond the first set (whose parts are "tuned" and "held_out"), by name.
LATER_PARTS: dict[str, tuple[TwoTurns, ...]] = {
    "held_out2": HELD_OUT2,
    "tuned2": TUNING2,
    "tuned3": TUNING3,
    "tuned4": TUNING4,
    "switch4": SWITCHES4,  # second turns that change the subject
    "tuned5": TUNING5,
    "held_out3": HELD_OUT3,  # written after the others were measured (set6)
    "held_out4": HELD_OUT4,  # written blind after held_out3 was spent (set7)
    "held_out5": HELD_OUT5,  # written blind after held_out4 (set8)
    "held_out6": HELD_OUT6,  # written blind after held_out5 (set9)
    "held_out7": HELD_OUT7,  # written blind after held_out6 (set10)
    "held_out8": HELD_OUT8,  # written blind after held_out7 (set11)
}
PARTS = ("tuned", "held_out", *LATER_PARTS)
TUNING_PARTS = ("tuned", "tuned2", "tuned3", "tuned4", "switch4", "tuned5")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--home",
        type=Path,
        help="a RAGDOLL_HOME to index the corpus into and keep (a later run with the same "
        "--home indexes only the corpus files its index lacks, by name; default: a "
        "temporary one)",
    )
    parser.add_argument(
        "--parts",
        default=",".join(PARTS),
        help="the conversation parts to ask, comma-separated (default: all); "
        f"{', '.join(TUNING_PARTS)} are the tuning parts. The first set's first turns "
        "are asked whatever the parts, for the standalone checks",
    )
    parser.add_argument(
        "--model",
        help="a language model (folder or .gguf): follow-ups are rewritten by it as the "
        "product does with a model; first answers are cut to --answer-tokens, the "
        "standalone checks skipped (default: extractive mode, no model); with --set "
        "blind, every second turn is rewritten once and measured as the product uses "
        "rewrites and with every follow-up rewritten",
    )
    parser.add_argument(
        "--answer-tokens",
        type=int,
        default=48,
        help="with --model, the tokens of a first turn's answer the follow-up sees",
    )
    parser.add_argument(
        "--set",
        choices=("real", "blind"),
        default="real",
        help="blind: the blind multilingual conversations (bench/sets/conversations_blind.json) "
        "over bench.blind_docs' corpus, per language, searched as the engine does without a "
        "model (bench/conversation_blind.py); needs --index",
    )
    parser.add_argument(
        "--embedder",
        help="with --set blind: the embedder to index and ask with (a sentence-transformers "
        "folder or cached id; default: the product's); give each its own --index",
    )
    parser.add_argument(
        "--index", type=Path, help="with --set blind: keep the index here, reused when present"
    )
    parser.add_argument(
        "--language", help="with --set blind: only these languages (comma-separated: de,fr)"
    )
    parser.add_argument(
        "--ablate",
        help="with --set blind: also measure with each of these rules switched off alone "
        '(comma-separated names of bench/conversation_blind.py RULES, or "all")',
    )
    parser.add_argument(
        "--reranker",
        help='a cross-encoder (local folder or cached id) or "model" to re-order every '
        "question's candidates, as `ragdoll reranker` sets it; the home's own setting is "
        "put back after the run (default: the home's setting)",
    )


def run(args: argparse.Namespace) -> dict[str, Any]:
    if getattr(args, "set", "real") == "blind":
        from bench import conversation_blind

        return conversation_blind.run(args)
    say: Callable[[str], None] = (lambda _: None) if args.json else print
    corpus = find_real_docs()
    if corpus is None:
        raise SystemExit(
            "the real documents are not there: run `python -m bench.real_docs` "
            "(or set RAGDOLL_REAL_DOCS to where they are)"
        )
    parts = tuple(p.strip() for p in str(args.parts).split(","))
    unknown = sorted(set(parts) - set(PARTS))
    if unknown:
        raise SystemExit(f"unknown parts: {', '.join(unknown)} (known: {', '.join(PARTS)})")
    mode = Mode(model=args.model, answer_tokens=args.answer_tokens, reranker=args.reranker)
    if args.home is not None:
        figures = _measure(home=args.home, corpus=corpus, say=say, parts=parts, mode=mode)
    else:
        with tempfile.TemporaryDirectory(prefix="ragdoll-conv-") as tmp:
            home = Path(tmp) / "home"
            figures = _measure(home=home, corpus=corpus, say=say, parts=parts, mode=mode)
    say(_report(figures))
    return figures


def corpus_files(corpus: Path) -> list[Path]:
    """Every file of the real-docs corpus: the ones the questions are about and the
    rest, which compete with them in the search as a person's other documents do."""
    files = sorted(p for p in corpus.iterdir() if p.is_file())
    wanted = set(FILES) | {c.file for part in LATER_PARTS.values() for c in part}
    missing = sorted(wanted - {p.name for p in files})
    if missing:
        raise SystemExit(f"the corpus at {corpus} lacks {', '.join(missing)}")
    return files


@dataclass(frozen=True, kw_only=True)
class Mode:
    """Extractive (no model), or a model that rewrites follow-ups; its answers are cut
    short: only the citations are scored, and a first answer's opening is what the
    rewrite reads of it (conversation.rewrite_prompt_text keeps 400 characters)."""

    model: str | None = None
    answer_tokens: int = 48
    reranker: str | None = None  # None: the home's own setting

    def tokens(self, *, first: bool) -> int:
        return 256 if self.model is None else (self.answer_tokens if first else 1)


def _measure(
    *,
    home: Path,
    corpus: Path,
    say: Callable[[str], None],
    parts: tuple[str, ...] = PARTS,
    mode: Mode = Mode(),
) -> dict[str, Any]:
    os.environ["RAGDOLL_HOME"] = str(home)
    from engine.paths import resolve_paths
    from engine.service.core import Engine

    files = corpus_files(corpus)
    engine = Engine(paths=resolve_paths().ensure(), warm_up=False, watch=False)
    kept = engine.settings.reranker
    try:
        if mode.reranker is not None:
            engine.set_reranker(reranker=mode.reranker)
        if mode.model is not None:
            engine.models.set_model(model=mode.model)
        elif engine.status().answer_mode != "extractive":
            engine.models.set_model(model=None)
        began = time.perf_counter()
        indexed = {Path(d.path).name for d in engine.documents() if d.status == "indexed"}
        if any(f.name not in indexed for f in files):
            # Copies under the home, so that a kept --home does not depend on where the
            # corpus was; files indexed before are skipped.
            docs = home / "bench-docs"
            docs.mkdir(parents=True, exist_ok=True)
            for f in files:
                if not (docs / f.name).is_file():
                    shutil.copy2(f, docs / f.name)
            _, job = engine.add_folder(path=str(docs))
            version, progress = 0, job.snapshot()
            while progress.state not in ("done", "failed", "cancelled"):
                version, progress = job.wait_next(after=version, timeout_s=30.0)
            indexed = {Path(d.path).name for d in engine.documents() if d.status == "indexed"}
            absent = sorted(f.name for f in files if f.name not in indexed)
            if absent:
                raise SystemExit(f"not indexed ({progress.state}): {', '.join(absent)}")
        status = engine.status()
        say(
            f"index: {len(indexed)} files, {status.chunks} chunks "
            f"({time.perf_counter() - began:.0f} s to index or check)"
        )
        # With a model every answer is generated: the standalone checks' 200 questions
        # are extractive mode's, and only the parts asked are asked.
        firsts = [c for c in CONVERSATIONS if mode.model is None or _part(c) in parts]
        # With a model every question is generated: the rewrites' ceiling is extractive.
        rewrites = load_rewrites() if mode.model is None else {}
        pairs = [
            _ask_pair(
                engine=engine,
                conv=c,
                part=_part(c),
                follow=_part(c) in parts,
                mode=mode,
                rewrites=rewrites,
            )
            for c in firsts
        ]
        rows = [row for row, _ in pairs if row is not None]
        later = {
            name: [
                _ask_pair(
                    engine=engine,
                    conv=c,
                    part=name,
                    mode=mode,
                    rewrites=rewrites,
                )[0]
                for c in convs
            ]
            for name, convs in LATER_PARTS.items()
            if name in parts
        }
        standalone: dict[str, Any] = {}
        if mode.model is None:
            standalone = conversation_standalone.measure(
                ask=lambda **kw: _ask(engine=engine, **kw), first_turns=[t for _, t in pairs]
            )
            standalone["judged"] = conversation_standalone.judged()
        reranker = engine.settings.reranker
    finally:
        if engine.settings.reranker != kept:
            engine.set_reranker(reranker=kept)
        engine.close()
    every = rows + [r for part in later.values() for r in part]
    also = load_also()
    for row in every:
        row["found_also"] = found_also(row=row, also=also)
    followups = [r for r in every if r["part"] != "switch4"]
    return {
        "top": TOP,
        "model": mode.model,
        "reranker": reranker,
        "parts": list(parts),
        "conversations": len(every),
        **{
            name: _score([r for r in rows if r["part"] == name])
            for name in ("tuned", "held_out")
            if name in parts
        },
        **{name: _score(part) for name, part in later.items()},
        "all": _score(rows),  # the first set's 43, as reported before the second set
        "with_pages": _score([r for r in rows if r["pages"] is not None]),
        "all_parts": _score(followups),  # follow-ups only: the switches are apart
        "rows": every,
        "standalone": standalone,
        "index": {"documents": len(indexed), "files": sorted(indexed), "chunks": status.chunks},
        "machine": {"load_average": _load(), "cpus": os.cpu_count()},
    }


def _part(conv: TwoTurns) -> str:
    return "held_out" if conv.held_out else "tuned"


def _ask_pair(
    *,
    engine: Any,
    conv: TwoTurns,
    part: str,
    follow: bool = True,
    mode: Mode = Mode(),
    rewrites: Mapping[tuple[str, str], str] | None = None,
) -> tuple[dict[str, Any] | None, Turn]:
    """The conversation's row (None without `follow`: its first turn only, for the
    standalone checks) and its first turn; where `rewrites` holds the follow-up
    written out by hand (bench/conversation_rewrites.py), whether it, asked
    alone, finds the page."""
    answer, citations, _ = _ask(
        engine=engine, question=conv.first, history=[], tokens=mode.tokens(first=True)
    )
    turn = Turn(question=conv.first, answer=answer, citations=citations)
    if not follow:
        return None, turn
    hedged: list[str] = []
    later = mode.tokens(first=False)
    _, follow, searched = _ask(
        engine=engine, question=conv.follow_up, history=[turn], hedged=hedged, tokens=later
    )
    _, alone, _ = _ask(engine=engine, question=conv.follow_up, history=[], tokens=later)
    found_rewritten = None
    rewrite = (rewrites or {}).get((conv.first, conv.follow_up))
    if rewrite is not None:
        _, written, _ = _ask(engine=engine, question=rewrite, history=[], tokens=later)
        found_rewritten = _found(conv, written)
    row = {
        "file": conv.file,
        "pages": list(conv.pages) if conv.pages is not None else None,
        "held_out": part not in TUNING_PARTS,
        "part": part,
        "first": conv.first,
        "follow_up": conv.follow_up,
        "searched": searched,
        "searched_hedged": hedged[0] if hedged else "",
        "found": _found(conv, follow),
        "found_alone": _found(conv, alone),
        "found_rewritten": found_rewritten,  # None: no hand-written rewrite
        "top": [_where(c) for c in follow[:TOP]],
    }
    return row, turn


def _ask(
    *,
    engine: Any,
    question: str,
    history: list[Turn],
    hedged: list[str] | None = None,
    tokens: int = 256,
) -> tuple[str, list[Any], str]:
    """The answer, its citations and the "searched for" line of a question the engine
    took for a follow-up; `hedged` collects the line shown for a question judged
    standalone whose results the earlier turn changed."""
    citations: list[Any] = []
    answer = searched = ""
    for event in engine.ask_stream(
        question=question, history=history, priority="background", max_new_tokens=tokens
    ):
        if isinstance(event, CitationsEvent):
            citations = event.citations
        elif isinstance(event, DoneEvent):
            answer = event.done.answer
        elif getattr(event, "name", "") == "searched":
            if getattr(event, "hedged", False):
                if hedged is not None:
                    hedged.append(event.shown())
            else:
                searched = event.shown()
    return answer, citations, searched


def _found(conv: TwoTurns, citations: list[Any]) -> bool:
    for c in citations[:TOP]:
        if Path(c.path).name != conv.file:
            continue
        if conv.pages is None or c.page in conv.pages:
            return True
    return False


def _where(c: Any) -> str:
    return Path(c.path).name + (f" p.{c.page}" if c.page is not None else "")


def _score(rows: list[dict[str, Any]]) -> dict[str, Any]:
    n = len(rows)
    found = sum(r["found"] for r in rows)
    dependent = sum(bool(r["searched"]) for r in rows)  # "searched for" before the search
    leaned = sum(bool(r.get("searched_hedged")) for r in rows)
    alone = sum(r["found_alone"] for r in rows)
    written = [r["found_rewritten"] for r in rows if r.get("found_rewritten") is not None]
    also = sum(r.get("found_also", r["found"]) for r in rows)
    return {
        "n": n,
        "found": found,
        "rate": found / n if n else 0.0,
        "found_alone": alone,
        "rate_alone": alone / n if n else 0.0,
        "dependent": dependent,
        "hedged_shown": leaned,  # judged standalone, the earlier turn changed the results
        "found_also": also,  # or the same answer in the other bash manual's top-3 page
        "rewritten": len(written),  # follow-ups with a hand-written rewrite
        "found_rewritten": sum(written),  # ... that, asked alone, finds the page
    }


def _report(figures: dict[str, Any]) -> str:
    def line(name: str, s: dict[str, Any]) -> str:
        return (
            f"{name}: {s['found']}/{s['n']} ({s['rate']:.0%}) with the conversation, "
            f"{s['found_alone']}/{s['n']} ({s['rate_alone']:.0%}) asked alone; "
            f"taken for a follow-up {s['dependent']}/{s['n']}, "
            f"judged standalone with results the history changed {s['hedged_shown']}/{s['n']}"
            + (
                f"; {s['found_also']}/{s['n']} counting the same answer in the other bash manual"
                if s.get("found_also", s["found"]) != s["found"]
                else ""
            )
            + (
                f"; written out in full by hand and asked alone "
                f"{s['found_rewritten']}/{s['rewritten']}"
                if s.get("rewritten")
                else ""
            )
        )

    misses = [
        f"  missed ({r['part']}): {r['follow_up']!r} after {r['first']!r} -> {r['top']}"
        for r in figures["rows"]
        if not r["found"] and r.get("part", "tuned") in TUNING_PARTS
    ]
    names = {
        "tuned": "tuned set",
        "held_out": "held-out set",
        "held_out2": "second held-out set",
        "tuned2": "second tuning set",
        "tuned3": "third tuning set",
        "tuned4": "fourth tuning set",
        "switch4": "fourth tuning set's topic switches",
        "tuned5": "fifth tuning set",
        "held_out3": "third held-out set",
        "held_out4": "fourth held-out set",
        "held_out5": "fifth held-out set",
        "held_out6": "sixth held-out set",
        "held_out7": "seventh held-out set",
        "held_out8": "eighth held-out set",
    }
    asked = [p for p in PARTS if p in figures]
    model = figures.get("model")
    how = f"follow-ups rewritten by {Path(model).name}" if model else "extractive mode"
    if figures.get("reranker"):
        how += f", candidates re-ordered by {Path(figures['reranker']).name}"
    return "\n".join(
        [
            f"follow-up's right file and page in the top {figures['top']} ({how}), "
            f"load average {figures['machine']['load_average']}",
            *(line(names[p], figures[p]) for p in asked),
            line("all of the first set's parts asked", figures["all"]),
            line("first set, files with pages", figures["with_pages"]),
            line("all follow-up parts asked", figures["all_parts"]),
            *misses,
            *(
                conversation_standalone.report(figures["standalone"])
                if figures["standalone"]
                else []
            ),
        ]
    )


def _load() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None
