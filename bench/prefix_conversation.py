"""`ragdoll bench prefix`, the product path: time to first token of turns 2-5 of a
conversation asked through the engine's own answering API (`Engine.ask_stream` with
the conversation's history: the retrieval pipeline, the relevance gate, the prompt
`build_prompt` makes, the generation pipeline), with the prefix KV cache and without.

A real document (git-bisect.txt of the real-docs corpus, or any `--docs` folder) is
indexed into a temporary engine whose model is a random-weight Llama; the same five
questions are asked as one conversation twice, once with the answerer's prefix cache
turned off and once with it emptied first, and each turn's time from the call to its
first token is taken, with the tokens the cache served and how many of the turn's
sources an earlier turn showed (the prompt references those instead of repeating
them). The relevance gate's sentence vectors kept by earlier conversations
(engine/rag/answer/sentence_memo.py) are dropped before each one, on both sides, as the
prefix cache is. The questions name their subject, so no follow-up rewrite runs before
them (a rewrite is a generation of its own, on both sides alike). Answers are greedy:
both runs see the same answers and so the same prompts, which is checked.
"""

from __future__ import annotations

import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.real_docs import find_real_docs
from engine.environ import environment
from engine.wire import CitationsEvent, DoneEvent, TokenEvent, Turn

QUESTIONS = (
    "How do I start a git bisect session?",
    "How does git bisect run decide whether a commit is good or bad?",
    "How do I tell git bisect that the current commit is good?",
    "How do I see the log of a git bisect session?",
    "How do I end a git bisect session and go back to the original branch?",
)
ANSWER_TOKENS = 16


def measure_conversation_ttft(
    *, model_dir: Path, docs: Path | None = None, repeats: int = 1, k: int = 3
) -> dict[str, Any]:
    """Per turn: TTFT without and with prefix reuse (medians of `repeats`), the
    prompt's tokens and how many of them the cache served."""
    corpus = docs or find_real_docs()
    if corpus is None:
        raise SystemExit(
            "the real documents are not there: run `python -m bench.real_docs` "
            "(or set RAGDOLL_REAL_DOCS), or give --docs FOLDER"
        )
    with tempfile.TemporaryDirectory(prefix="ragdoll-prefix-conv-") as tmp:
        folder = Path(tmp) / "docs"
        folder.mkdir()
        if docs is None:
            shutil.copy2(corpus / "git-bisect.txt", folder / "git-bisect.txt")
        else:
            shutil.copytree(docs, folder, dirs_exist_ok=True)
        # RAGDOLL_AUTO_PROFILE=0: no profiling samples during the timing.
        home = {"RAGDOLL_HOME": str(Path(tmp) / "home"), "RAGDOLL_AUTO_PROFILE": "0"}
        with environment(home):
            return _measure(folder=folder, model_dir=model_dir, repeats=repeats, k=k)


def _measure(*, folder: Path, model_dir: Path, repeats: int, k: int) -> dict[str, Any]:
    from engine.paths import resolve_paths
    from engine.service.core import Engine

    engine = Engine(paths=resolve_paths().ensure(), warm_up=False, watch=False)
    try:
        _, job = engine.add_folder(path=str(folder))
        version, progress = 0, job.snapshot()
        while progress.state not in ("done", "failed", "cancelled"):
            version, progress = job.wait_next(after=version, timeout_s=30.0)
        engine.models.set_model(model=str(model_dir))
        answerer = engine.language_model()
        cache = answerer.prefix_cache
        assert cache is not None, "the answerer was made without a prefix cache"
        _conversation(engine=engine, k=k)  # warm: first-use costs are on neither side
        runs: dict[str, list[list[dict[str, Any]]]] = {"off": [], "on": []}
        for _ in range(repeats):
            answerer.prefix_cache = None
            runs["off"].append(_conversation(engine=engine, k=k))
            cache.clear()  # each "on" conversation starts from an empty cache
            answerer.prefix_cache = cache
            runs["on"].append(_conversation(engine=engine, k=k))
        turns = []
        for t in range(len(QUESTIONS)):
            off = [run[t] for run in runs["off"]]
            on = [run[t] for run in runs["on"]]
            cold = _median([r["ttft_s"] for r in off])
            warm = _median([r["ttft_s"] for r in on])
            turns.append(
                {
                    "turn": t + 1,
                    "prompt_tokens": on[0]["prompt_tokens"],
                    "reused_tokens": on[0]["reused_tokens"],
                    "new_tokens": (on[0]["prompt_tokens"] or 0) - on[0]["reused_tokens"],
                    "repeated_sources": on[0]["repeated_sources"],
                    "sources": on[0]["sources"],
                    "ttft_off_s": cold,
                    "ttft_on_s": warm,
                    "speedup": cold / warm if cold and warm else None,
                    "same_answer": all(
                        a["answer"] == b["answer"] for a, b in zip(off, on, strict=True)
                    ),
                }
            )
        executor = answerer.executor
        info = engine.pipeline_info()
        recent = list(info.requests) if info is not None else []
        return {
            "breakdown_last_turns": [
                {
                    "waiting_s": round(r.waiting_s, 3),
                    "retrieval_s": round(r.retrieval_s, 3),
                    "ttft_s": round(r.ttft_s, 3) if r.ttft_s is not None else None,
                }
                for r in recent[-2 * len(QUESTIONS) :]
            ],
            "turns": turns,
            "k": k,
            "answer_tokens": ANSWER_TOKENS,
            "repeats": repeats,
            "device": str(executor.device),
            "chunks": engine.status().chunks,
        }
    finally:
        engine.close()


def _conversation(*, engine: Any, k: int) -> list[dict[str, Any]]:
    """The five questions as one conversation: each with the turns before it. The
    gate's sentence vectors kept from earlier conversations are dropped first, on
    both sides: a conversation reuses only what its own earlier turns computed."""
    engine.serving().sentence_memo.clear()
    answerer = engine.language_model()
    history: list[Turn] = []
    shown: set[tuple[str, int | None, str]] = set()
    out = []
    for question in QUESTIONS:
        cache = answerer.prefix_cache
        reused_before = cache.stats().tokens_reused if cache is not None else 0
        began = time.perf_counter()
        first: float | None = None
        citations: list[Any] = []
        answer = ""
        prompt_tokens = None
        events = engine.ask_stream(
            question=question, k=k, history=history, max_new_tokens=ANSWER_TOKENS
        )
        for event in events:
            if isinstance(event, TokenEvent) and first is None:
                first = time.perf_counter() - began
            elif isinstance(event, CitationsEvent):
                citations = event.citations
            elif isinstance(event, DoneEvent):
                answer = event.done.answer
                prompt_tokens = event.done.prompt_tokens
        reused = (cache.stats().tokens_reused - reused_before) if cache is not None else 0
        keys = [(c.path, c.page, " ".join(c.text.split())) for c in citations]
        out.append(
            {
                "ttft_s": first,
                "answer": answer,
                "prompt_tokens": prompt_tokens,
                "reused_tokens": reused,
                # this turn's sources an earlier turn showed (the prompt references them)
                "repeated_sources": sum(key in shown for key in keys),
                "sources": len(keys),
            }
        )
        shown.update(keys)
        history.append(Turn(question=question, answer=answer, citations=citations))
    return out


def _median(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None
