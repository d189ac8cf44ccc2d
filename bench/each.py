"""`ragdoll bench each`: one question asked of every document, on 50 real documents.

The set (bench/sets/each.json) names the documents and, per question, the pages
where each document states the answer and the documents that never state it; a
question marked `held_out` was written after the per-document gate was set on the
others, and judges it. The
benchmark indexes them in an engine of its own (in-process: LanceDB on disk, PDFium,
the bundled embedder), asks each question of every document (`engine.each.stream`,
not reusing earlier rows) and reports:

- right page: of the documents that state it, the share whose answer cites a stated
  page first (its first [n] marker; `first`), or a stated page is anywhere among its
  passages (`any`); a file without pages counts when it is answered;
- not stated: of the documents that never state it, the share answered "not stated";
- a re-run with every document unchanged (rows reused) against the first run;
- the window's chat while a run goes on: an interactive question's time to its answer
  idle and during a run (median of `--chat-tries`), and their ratio.

With `--model` (a .gguf or a folder), the first question is also asked with the model
of `--model-docs` documents, together (ask each, background, batched) and one at a
time (each document's request waited for before the next is sent, as a person asking
them in turn would), with answers of at most `--answer-tokens` tokens: the wall clock
and the CPU time of this process (all its threads; a shared machine disturbs it less)
of each side, the generation batches' sizes, and how many answers came out the same.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import statistics
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

from bench.real_docs import default_dir, fetch_real_docs
from engine.wire_each import DocumentAnswer, EachRequest, FinishedEvent, RowEvent

SET_FILE = Path(__file__).with_name("sets") / "each.json"
CHAT_QUESTION = "How do I declare options in a LaTeX class file?"
COLLECTION = "each-bench"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--home", type=Path, help="a RAGDOLL_HOME to keep (default: temporary)")
    parser.add_argument("--k", type=int, default=3, help="passages per document (default 3)")
    parser.add_argument("--chat-tries", type=int, default=3, help="chat questions timed each way")
    parser.add_argument(
        "--parts",
        default="questions,chat,model",
        help="what to measure, comma-separated: questions, chat, model (with --model)",
    )
    parser.add_argument("--model", help="a language model (.gguf or folder) for the model run")
    parser.add_argument("--model-docs", type=int, default=8, help="documents in the model run")
    parser.add_argument("--answer-tokens", type=int, default=32, help="model answer length")


def run(args: argparse.Namespace) -> dict[str, Any]:
    say: Callable[[str], None] = (lambda _: None) if args.json else print
    spec = json.loads(SET_FILE.read_text(encoding="utf-8"))
    with _home(args.home) as home:
        corpus = _corpus(spec=spec, root=home / "each-corpus")
        return _measure(spec=spec, corpus=corpus, home=home, args=args, say=say)


@contextmanager
def _home(home: Path | None) -> Iterator[Path]:
    if home is not None:
        home.mkdir(parents=True, exist_ok=True)
        yield home
        return
    with tempfile.TemporaryDirectory(prefix="ragdoll-bench-each-") as tmp:
        yield Path(tmp)


def _corpus(*, spec: dict[str, Any], root: Path) -> Path:
    """The set's 50 files in one folder: the real-docs corpus's, and the LaTeX package
    documentation unpacked from its Debian package (downloaded once, with apt-get)."""
    root.mkdir(parents=True, exist_ok=True)
    real = fetch_real_docs(quiet=True)
    debs = default_dir() / "debs"
    packages = sorted({d["package"] for d in spec["documents"] if "package" in d})
    missing = [p for p in packages if not list(debs.glob(f"{p}_*.deb"))]
    if missing:
        debs.mkdir(parents=True, exist_ok=True)
        subprocess.run(["apt-get", "download", *missing], cwd=debs, check=True)
    with tempfile.TemporaryDirectory() as tmp:
        for p in packages:
            (deb,) = debs.glob(f"{p}_*.deb")
            subprocess.run(["dpkg", "-x", str(deb), tmp], check=True)
        for d in spec["documents"]:
            dest = root / d["name"]
            if dest.exists():
                continue
            src = real / d["corpus"] if "corpus" in d else Path(tmp) / d["path"]
            shutil.copyfile(src, dest)
    return root


def _measure(
    *, spec: dict[str, Any], corpus: Path, home: Path, args: argparse.Namespace, say: Any
) -> dict[str, Any]:
    from engine.paths import resolve_paths
    from engine.service.core import Engine

    engine = Engine(
        paths=resolve_paths(env={"RAGDOLL_HOME": str(home / "home")}), warm_up=False, watch=False
    )
    try:
        started = time.monotonic()
        _, job = engine.add_folder(path=str(corpus), collection=COLLECTION)
        _wait(job)
        say(f"indexed {len(spec['documents'])} documents in {time.monotonic() - started:.0f} s")
        parts = {p.strip() for p in str(args.parts).split(",")}
        figures: dict[str, Any] = {"documents": len(spec["documents"]), "k": args.k}
        if "questions" in parts:
            figures["questions"] = [
                _question(engine=engine, spec=q, k=args.k, say=say) for q in spec["questions"]
            ]
        if "chat" in parts:
            figures["chat"] = _chat(
                engine=engine, spec=spec, k=args.k, tries=args.chat_tries, say=say
            )
        if args.model and "model" in parts:
            figures["model"] = _model_run(
                engine=engine, spec=spec, corpus=corpus, args=args, say=say
            )
        return figures
    finally:
        engine.close()


def _wait(job: Any) -> None:
    version = 0
    while job.snapshot().state not in ("done", "failed", "cancelled"):
        version, _ = job.wait_next(after=version, timeout_s=1.0)
    if job.snapshot().state != "done":
        raise SystemExit(f"indexing the set ended {job.snapshot().state}")


def _ask(
    engine: Any, *, question: str, scope: str, k: int, reuse: bool, tokens: int = 256
) -> tuple[list[DocumentAnswer], float]:
    started = time.monotonic()
    rows: list[DocumentAnswer] = []
    request = EachRequest(question=question, scope=scope, k=k, reuse=reuse, max_new_tokens=tokens)
    for event in engine.each.stream(request=request):
        if isinstance(event, RowEvent):
            rows.append(event.row)
        elif isinstance(event, FinishedEvent):
            break
    return rows, time.monotonic() - started


def _question(*, engine: Any, spec: dict[str, Any], k: int, say: Any) -> dict[str, Any]:
    question = spec["question"]
    rows, seconds = _ask(engine, question=question, scope=COLLECTION, k=k, reuse=False)
    _, rerun_s = _ask(engine, question=question, scope=COLLECTION, k=k, reuse=True)
    scored = score(rows=rows, spec=spec)
    held_out = bool(spec.get("held_out"))
    scored.update(
        seconds=round(seconds, 2),
        rerun_seconds=round(rerun_s, 3),
        question=question,
        held_out=held_out,
    )
    say(
        f"{question!r}{' (held out)' if held_out else ''}: right page first "
        f"{scored['right_page_first']:.2f}, anywhere "
        f"{scored['right_page_any']:.2f} of {scored['stated']}; not stated "
        f"{scored['not_stated_right']:.2f} of {scored['not_stated']}; {seconds:.1f} s, "
        f"re-run {rerun_s:.2f} s"
    )
    return scored


def score(*, rows: list[DocumentAnswer], spec: dict[str, Any]) -> dict[str, Any]:
    """The shares of right pages and right refusals, and each miss, by file name."""
    by_name = {Path(r.path).name: r for r in rows}
    states: dict[str, list[int | None]] = spec["states"]
    first = anywhere = refused = 0
    misses: list[dict[str, Any]] = []
    for name, pages in states.items():
        row = by_name[name]
        cited = cited_pages(row)
        ok_first = row.status == "answered" and bool(cited) and cited[0] in pages
        ok_any = row.status == "answered" and any(p in pages for p in cited)
        first += ok_first
        anywhere += ok_any
        if not ok_first:
            misses.append({"document": name, "status": row.status, "pages": cited, "want": pages})
    for name in spec["not_stated"]:
        row = by_name[name]
        refused += row.status == "not_stated"
        if row.status != "not_stated":
            misses.append(
                {"document": name, "status": row.status, "pages": [c.page for c in row.citations]}
            )
    return {
        "stated": len(states),
        "not_stated": len(spec["not_stated"]),
        "right_page_first": round(first / max(1, len(states)), 3),
        "right_page_any": round(anywhere / max(1, len(states)), 3),
        "not_stated_right": round(refused / max(1, len(spec["not_stated"])), 3),
        "misses": misses,
    }


def cited_pages(row: DocumentAnswer) -> list[int | None]:
    """The pages of the passages the answer cites ([n] markers, in the order written),
    then those of the rest it was given: what the person is pointed to first."""
    by_index = {c.index: c.page for c in row.citations}
    marked = [int(n) for n in re.findall(r"\[(\d+)\]", row.answer) if int(n) in by_index]
    order = list(dict.fromkeys(marked)) + [c.index for c in row.citations if c.index not in marked]
    return [by_index[i] for i in order]


def _chat_once(engine: Any) -> float:
    from engine.wire import DoneEvent

    started = time.monotonic()
    for event in engine.ask_stream(question=CHAT_QUESTION, k=3, priority="interactive"):
        if isinstance(event, DoneEvent):
            break
    return time.monotonic() - started


def _chat(*, engine: Any, spec: dict[str, Any], k: int, tries: int, say: Any) -> dict[str, Any]:
    """The chat's time to its answer idle, then while a run over every document goes on
    (the run started first; each chat question asked while it is still running)."""
    _chat_once(engine)  # warm: the first question loads what later ones reuse
    idle = [_chat_once(engine) for _ in range(tries)]
    during: list[float] = []
    run_s: list[float] = []
    for _ in range(tries):
        first_row = threading.Event()
        done = threading.Event()

        def each(first_row: threading.Event = first_row, done: threading.Event = done) -> None:
            started = time.monotonic()
            for event in engine.each.stream(
                request=EachRequest(
                    question=spec["questions"][0]["question"], scope=COLLECTION, k=k, reuse=False
                )
            ):
                if isinstance(event, RowEvent):
                    first_row.set()
            run_s.append(time.monotonic() - started)
            done.set()

        threading.Thread(target=each, daemon=True).start()
        first_row.wait(timeout=300)
        if not done.is_set():
            during.append(_chat_once(engine))
        done.wait(timeout=600)
    idle_s, during_s = statistics.median(idle), statistics.median(during) if during else None
    ratio = round(during_s / idle_s, 2) if during_s is not None else None
    say(
        f"chat: {idle_s:.2f} s idle, "
        + (f"{during_s:.2f} s during a run ({ratio}x)" if during_s else "runs ended too soon")
    )
    return {
        "idle_s": [round(s, 3) for s in idle],
        "during_s": [round(s, 3) for s in during],
        "median_idle_s": round(idle_s, 3),
        "median_during_s": round(during_s, 3) if during_s is not None else None,
        "ratio": ratio,
        "run_seconds": [round(s, 2) for s in run_s],
    }


def _batch_sizes(engine: Any, *, since: float) -> dict[str, list[int]]:
    """The sizes of the batches each worker ran since `since` (the pipeline's timeline)."""
    info = engine.pipeline_info()
    points = [b for b in (info.batches if info is not None else []) if b.started >= since]
    return {w: [b.size for b in points if b.worker == w] for w in ("retrieval", "generation")}


def _model_run(
    *, engine: Any, spec: dict[str, Any], corpus: Path, args: argparse.Namespace, say: Any
) -> dict[str, Any]:
    """The first question with the model, over `--model-docs` documents (two thirds
    that state it, in the set's order, a third that do not): together, then one
    document at a time, the model's prefix cache emptied before each."""
    question_spec = spec["questions"][0]
    stated = [n for n, pages in question_spec["states"].items() if pages != [None]]
    absent = max(1, args.model_docs // 3)
    names = stated[: args.model_docs - absent] + question_spec["not_stated"][:absent]
    folder = corpus.parent / "each-model"
    folder.mkdir(exist_ok=True)
    for name in names:
        if not (folder / name).exists():
            shutil.copyfile(corpus / name, folder / name)
    _, job = engine.add_folder(path=str(folder), collection="each-model")
    _wait(job)
    loaded = time.monotonic()
    engine.models.set_model(model=args.model)
    say(f"model loaded in {time.monotonic() - loaded:.0f} s")
    tokens = args.answer_tokens
    question = question_spec["question"]
    # One warm request, so that neither side pays the first prefill's setup.
    ask = partial(_ask, engine, question=question, k=args.k, reuse=False, tokens=tokens)
    ask(scope=str(folder / names[0]))
    # Neither side may start from KV the other left (engine/runtime/executor/prefix_cache.py).
    cache = engine.language_model().prefix_cache
    if cache is not None:
        cache.clear()
    since = time.time()
    cpu = time.process_time()
    rows, together_s = ask(scope="each-model")
    together_cpu_s = time.process_time() - cpu
    together_batches = _batch_sizes(engine, since=since)
    if cache is not None:
        cache.clear()
    since = time.time()
    started = time.monotonic()
    cpu = time.process_time()
    alone_rows = [ask(scope=str(folder / name))[0][0] for name in names]
    alone_cpu_s = time.process_time() - cpu
    alone_s = time.monotonic() - started
    alone_batches = _batch_sizes(engine, since=since)
    sub = {
        "states": {n: p for n, p in question_spec["states"].items() if n in names},
        "not_stated": [n for n in question_spec["not_stated"] if n in names],
    }
    scored = score(rows=rows, spec=sub)
    ratio = round(together_s / alone_s, 3)
    cpu_ratio = round(together_cpu_s / alone_cpu_s, 3) if alone_cpu_s > 0 else None
    alone_answers = {Path(r.path).name: r.answer for r in alone_rows}
    same = sum(alone_answers.get(Path(r.path).name) == r.answer for r in rows)
    say(
        f"model: {len(names)} documents together {together_s:.1f} s, one at a time "
        f"{alone_s:.1f} s ({ratio}x; CPU {together_cpu_s:.1f} against {alone_cpu_s:.1f} s, "
        f"{cpu_ratio}x); the same answer both ways {same} of {len(rows)}; right page "
        f"{scored['right_page_first']:.2f}, not stated {scored['not_stated_right']:.2f}; "
        f"generation batches {together_batches['generation']}"
    )
    return {
        "model": args.model,
        "documents": len(names),
        "answer_tokens": tokens,
        "together_s": round(together_s, 2),
        "one_at_a_time_s": round(alone_s, 2),
        "ratio": ratio,
        "together_cpu_s": round(together_cpu_s, 2),
        "one_at_a_time_cpu_s": round(alone_cpu_s, 2),
        "cpu_ratio": cpu_ratio,
        "same_answers": same,
        "one_at_a_time_answers": alone_answers,
        "batch_sizes": {"together": together_batches, "one_at_a_time": alone_batches},
        **scored,
        "answers": {Path(r.path).name: r.answer for r in rows},
        "modes": sorted({r.mode for r in rows}),
    }
