"""`ragdoll bench server`: RAGDoll with a real OpenAI-compatible model server as its
generator (llama-cpp-python's server on loopback, the real Qwen2.5-Coder-0.5B-Instruct
GGUF), on real manuals, side by side in one run:

- what RAGDoll adds to the server's own time to first token: each question asked
  through RAGDoll's OpenAI-compatible API (retrieval, the relevance gate and the
  prompt included), its first piece of text timed there, and the server's own time
  to first token of the very request RAGDoll sent, timed by a relay in between
  (bench/server_proxy.py): added = RAGDoll's - the server's;
- N questions asked at once: every one completes (RAGDoll's pipeline keeps at most
  `--concurrency` requests on the server, the rest wait their turn);
- a follow-up: its prompt starts with the first turn as it was sent (asserted), and
  the tokens the server's KV cache served for it, from the server's own log.

Needs `pip install 'ragdoll-desktop[server-bench]'` (llama-cpp-python and its server's
parts), the model (`python -m bench.real_models`) and the documents
(`python -m bench.real_docs`).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

DEFAULT_MODEL = "qwen2.5-coder-0.5b-instruct-q4_k_m"
# Real manuals of the corpus small enough to index in a minute on a busy machine.
DEFAULT_DOCS = ("apt-guide.txt", "git-bisect.txt", "git-rebase.html", "sqlite-createtable.html")
QUESTIONS = (
    "Will apt-get upgrade ever add new packages?",
    "How do I get back to my original HEAD after bisecting?",
    "How do I cancel a rebase and get back to where I was?",
    "Which apt-get option only downloads the packages?",
    "Can I use other words than good and bad when bisecting?",
    "How do I run a command such as the tests after each rebased commit?",
    "What must I do before using apt-get the first time?",
    "How do I make bisect follow only the first parent of merge commits?",
)
FOLLOW_UP = (
    "How do I tell bisect to leave out a whole range of commits?",
    "And how do I undo that?",
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", default=DEFAULT_MODEL, help="a model of real_models.py")
    parser.add_argument("--timed", type=int, default=3, help="questions timed one at a time")
    parser.add_argument("--at-once", type=int, default=8, help="questions asked at once")
    parser.add_argument("--max-tokens", type=int, default=12, help="tokens each answer writes")
    parser.add_argument("-k", type=int, default=3, help="passages per question")
    parser.add_argument(
        "--concurrency",
        type=int,
        default=1,
        help="requests in flight on the server (llama-cpp-python's server runs one at a time)",
    )
    parser.add_argument("--threads", type=int, default=None, help="the server's threads")


def run(args: argparse.Namespace) -> dict[str, Any]:
    from bench.llama_server import llama_server, missing_server_parts
    from bench.real_docs import find_real_docs
    from bench.real_models import fetch_hint, find_real_model
    from bench.server_proxy import timing_relay

    missing = missing_server_parts()
    if missing:
        raise SystemExit(
            f"llama-cpp-python's server is missing {', '.join(missing)}: "
            "pip install 'ragdoll-desktop[server-bench]'"
        )
    model = find_real_model(args.model)
    if model is None:
        raise SystemExit(fetch_hint(args.model))
    corpus = find_real_docs()
    if corpus is None:
        raise SystemExit("the real documents are not here: python -m bench.real_docs")
    if args.quick:
        args.timed, args.at_once = min(args.timed, 2), min(args.at_once, 4)
    say = (lambda *a: None) if args.json else print
    root = Path(tempfile.mkdtemp(prefix="ragdoll-bench-server-"))
    figures: dict[str, Any] = {
        "model": args.model,
        "docs": list(DEFAULT_DOCS),
        "k": args.k,
        "max_tokens": args.max_tokens,
        "concurrency": args.concurrency,
        "load_before": os.getloadavg(),
        "cpus": os.cpu_count(),
    }
    try:
        docs = root / "docs"
        docs.mkdir()
        for name in DEFAULT_DOCS:
            shutil.copy(corpus / name, docs / name)
        with (
            llama_server(model=model, log=root / "llama.log", threads=args.threads) as server,
            timing_relay(upstream=server.url) as relay,
            _engine(home=root / "home") as client,
        ):
            started = time.perf_counter()
            job = client.add_paths(paths=[str(docs)])
            for _ in client.ingest_events(job_id=job.job_id):
                pass
            figures["ingest_s"] = round(time.perf_counter() - started, 1)
            say(f"indexed {len(DEFAULT_DOCS)} manuals in {figures['ingest_s']} s")
            client.set_model_server(url=relay.url, model=server.alias, concurrency=args.concurrency)
            _openai_answer(client, question=QUESTIONS[-1], args=args)  # warm: pages of the model
            figures["first_token"] = _timed(client, relay=relay, args=args, say=say)
            figures["at_once"] = _at_once(client, args=args, say=say)
            figures["follow_up"] = _follow_up(
                client, relay=relay, server=server, args=args, say=say
            )
            figures["status_server"] = _status_server(client)
    finally:
        figures["load_after"] = os.getloadavg()
        shutil.rmtree(root, ignore_errors=True)
    say(json.dumps({k: figures[k] for k in ("load_before", "load_after")}))
    return figures


class _engine:
    """A real engine process in its own home, stopped at the end."""

    def __init__(self, *, home: Path) -> None:
        self.home = home

    def __enter__(self) -> Any:
        from engine.environ import HOME_ENV
        from engine.paths import resolve_paths
        from engine.service.client import EngineClient

        saved = os.environ.get(HOME_ENV)
        os.environ[HOME_ENV] = str(self.home)
        try:
            self.client = EngineClient.connect(paths=resolve_paths(), start=True, wait_s=300)
        finally:
            if saved is None:
                os.environ.pop(HOME_ENV, None)
            else:
                os.environ[HOME_ENV] = saved
        return self.client

    def __exit__(self, *exc: object) -> None:
        try:
            self.client.shutdown()
        finally:
            self.client.close()


def _openai_answer(client: Any, *, question: str, args: argparse.Namespace) -> dict[str, Any]:
    """One question through RAGDoll's OpenAI-compatible API, streamed: when its first
    piece of text came (perf_counter), its text, and how it ended."""
    body = {
        "model": "ragdoll",
        "messages": [{"role": "user", "content": question}],
        "stream": True,
        "max_tokens": args.max_tokens,
    }
    asked = time.perf_counter()
    first: float | None = None
    text, finish = "", None
    citations: list[dict[str, Any]] = []
    with client._http.stream("POST", "/v1/chat/completions", json=body, timeout=3600) as response:
        if response.status_code != 200:
            response.read()
            raise RuntimeError(f"the engine answered {response.status_code}: {response.text}")
        for line in response.iter_lines():
            data = line[5:].strip() if line.startswith("data:") else ""
            if not data or data == "[DONE]":
                continue
            chunk = json.loads(data)
            citations = chunk.get("citations") or citations  # RAGDoll's extension field
            for choice in chunk.get("choices", []):
                piece = (choice.get("delta") or {}).get("content") or ""
                if piece and first is None:
                    first = time.perf_counter()
                text += piece
                finish = choice.get("finish_reason") or finish
    return {
        "asked": asked,
        "first": first,
        "text": text,
        "finish": finish,
        "citations": citations,
        "ended": time.perf_counter(),
    }


def _timed(client: Any, *, relay: Any, args: argparse.Namespace, say: Any) -> dict[str, Any]:
    rows = []
    for question in QUESTIONS[: args.timed]:
        before = len(relay.requests)
        answer = _openai_answer(client, question=question, args=args)
        sent = [r for r in relay.requests[before:] if r.first_text is not None]
        if answer["first"] is None or not sent:
            rows.append({"question": question, "error": "no text", "text": answer["text"]})
            continue
        request = sent[-1]  # the answer's own request (a rewrite would come first)
        ragdoll = answer["first"] - answer["asked"]
        own = request.server_first_token_s
        rows.append(
            {
                "question": question,
                "ragdoll_first_token_ms": round(ragdoll * 1000, 1),
                "server_first_token_ms": round(own * 1000, 1),
                "added_ms": round((ragdoll - own) * 1000, 1),
                # Before the request reached the server: retrieval, the gate's search,
                # the prompt (the gate's reading may overlap the server's prefill).
                "before_server_ms": round((request.arrived - answer["asked"]) * 1000, 1),
                "prompt_chars": sum(len(m["content"]) for m in request.body["messages"]),
            }
        )
        say(
            f"first token: RAGDoll {rows[-1]['ragdoll_first_token_ms']:.0f} ms, the server's own "
            f"{rows[-1]['server_first_token_ms']:.0f} ms, added {rows[-1]['added_ms']:.0f} ms"
        )
    added = [r["added_ms"] for r in rows if "added_ms" in r]
    return {
        "rows": rows,
        "added_ms_median": statistics.median(added) if added else None,
        "added_ms_max": max(added) if added else None,
    }


def _at_once(client: Any, *, args: argparse.Namespace, say: Any) -> dict[str, Any]:
    questions = [QUESTIONS[i % len(QUESTIONS)] for i in range(args.at_once)]
    results: list[dict[str, Any] | None] = [None] * len(questions)
    errors: list[str] = []

    def ask(i: int) -> None:
        try:
            results[i] = _openai_answer(client, question=questions[i], args=args)
        except Exception as e:  # counted: the figure is how many complete
            errors.append(f"{type(e).__name__}: {e}")

    started = time.perf_counter()
    threads = [threading.Thread(target=ask, args=(i,)) for i in range(len(questions))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - started
    done = [r for r in results if r is not None and r["text"].strip()]
    say(f"{len(done)} of {len(questions)} questions asked at once completed in {wall:.1f} s")
    return {
        "asked": len(questions),
        "completed": len(done),
        "wall_s": round(wall, 1),
        "errors": errors,
        "finish": [r["finish"] if r else None for r in results],
    }


def _follow_up(
    client: Any, *, relay: Any, server: Any, args: argparse.Namespace, say: Any
) -> dict[str, Any]:
    from engine.wire import Citation, TokenEvent, Turn, from_json_dict

    # The first turn written whole (to max_tokens), so that the server keeps its state.
    answer = _openai_answer(client, question=FOLLOW_UP[0], args=args)
    first = relay.requests[-1].body["messages"]
    citations = [from_json_dict(Citation, c) for c in answer["citations"]]
    turn = Turn(question=FOLLOW_UP[0], answer=answer["text"], citations=citations)
    hits_before = len(server.prefix_hits())
    cancel = threading.Event()
    pieces = 0
    for event in client.ask_stream(cancel=cancel, k=args.k, history=[turn], question=FOLLOW_UP[1]):
        if isinstance(event, TokenEvent):
            pieces += 1
            if pieces >= args.max_tokens:
                cancel.set()
                break
    follow = relay.requests[-1].body["messages"]
    hits = server.prefix_hits()
    served, evaluated = hits[-1] if len(hits) > hits_before else (None, None)
    same_start = follow[:2] == first
    say(
        f"follow-up: starts with the first turn as sent: {same_start}; the server's cache "
        f"served {served} prompt tokens, evaluated {evaluated}"
    )
    return {
        "layout": [m["role"] for m in follow],
        "starts_with_first_turn": same_start,
        "cached_tokens": served,
        "evaluated_tokens": evaluated,
        "requests_between": len(hits) - hits_before,
    }


def _status_server(client: Any) -> dict[str, Any] | None:
    status = client.status()
    if status.server is None:
        return None
    return {
        "url_is_the_relay": status.server.url.startswith("http://127.0.0.1"),
        "model": status.server.model,
        "first_token_ms": status.server.first_token_ms,
    }


def main() -> None:
    import sys

    from bench.runner import kind_parser, run_kind

    module = sys.modules[__name__]
    options = kind_parser(kind="server", module=module).parse_args()
    raise SystemExit(run_kind(kind="server", module=module, options=options))


if __name__ == "__main__":
    main()
