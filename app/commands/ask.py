"""`ragdoll ask "QUESTION"`: an answer with its sources."""

from __future__ import annotations

import argparse
import json
import os
import sys

from app.commands.session import engine_session, fail
from engine.errors import EngineRequestError, EngineUnavailableError
from engine.wire import Answer, Citation, to_json_dict


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("ask", help="ask a question about your documents")
    p.add_argument("question")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--k", type=int, default=5, help="how many passages to retrieve (1-50)")
    p.add_argument(
        "--keep-engine", action="store_true", help="leave an engine started for this call running"
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if not 1 <= args.k <= 50:
        return fail("--k must be between 1 and 50", code=2)
    try:
        with engine_session(keep=args.keep_engine) as client:
            if args.json:
                answer = client.ask(question=args.question, k=args.k)
                print(json.dumps(to_json_dict(answer), ensure_ascii=False))
                return 0
            return _stream(client, question=args.question, k=args.k)
    except (EngineUnavailableError, EngineRequestError) as e:
        return fail(str(e))


def _stream(client, *, question: str, k: int) -> int:  # type: ignore[no-untyped-def]
    citations: list[Citation] = []
    for ev in client.ask_stream(question=question, k=k):
        if ev.citations is not None:
            citations = ev.citations
        elif ev.token is not None:
            print(ev.token, end="", flush=True)
        elif ev.error is not None:
            print()
            return fail(ev.error)
        elif ev.done is not None:
            print()
            _sources(
                Answer(
                    answer=ev.done.answer, citations=citations, mode=ev.done.mode, note=ev.done.note
                )
            )
    return 0


def _sources(answer: Answer) -> None:
    if answer.citations:
        print("\nSources:")
    for c in answer.citations:
        where = os.path.basename(c.path) + (f", page {c.page}" if c.page else "")
        snippet = " ".join(c.text.split())[:100]
        print(f"  [{c.index}] {where}: {snippet}…")
    if answer.note:
        print(f"\n{answer.note}", file=sys.stderr)
