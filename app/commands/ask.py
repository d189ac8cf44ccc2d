"""`ragdoll ask "QUESTION"`: an answer with its sources.

`ragdoll ask --conversation NAME "QUESTION"`: a question of a conversation kept under
the data folder (the window's conversations folder: a name of your own, or the id of a
conversation the window shows); the earlier turns go with the question, so a follow-up
("and the second one?") finds what it refers to, and the turn is appended.

`ragdoll ask --each PATH_OR_COLLECTION "QUESTION"`: the question of every document,
one row each (app/commands/ask_each.py).

`ragdoll ask --file QUESTIONS.txt`: a list of questions answered together (the
engine batches them), as a table with sources on stdout or in a CSV or Markdown file.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from app.batch.export import check_writable, format_for, render, write_results
from app.batch.questions import MAX_QUESTION_CHARS, QuestionsError, read_questions
from app.batch.runner import BatchResult, BatchRun, summary
from app.batch.visible import visible
from app.chat.answer_render import elide
from app.chat.conversations import history_of
from app.commands.ask_each import run_each
from app.commands.cli_conversation import CliConversation, open_conversation
from app.commands.session import engine_session, fail
from engine.errors import EngineRequestError, EngineUnavailableError
from engine.wire import (
    Answer,
    Citation,
    CitationsEvent,
    DoneEvent,
    FailedEvent,
    SearchedEvent,
    TokenEvent,
    to_json_dict,
)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("ask", help="ask a question (or a file of questions) about your documents")
    p.add_argument(
        "question",
        nargs="?",
        help=f"the question, at most {MAX_QUESTION_CHARS:,} characters (or use --file)",
    )
    p.add_argument(
        "--file",
        type=Path,
        metavar="QUESTIONS.txt",
        help="answer every question of a UTF-8 text file, one per line, each at most "
        f"{MAX_QUESTION_CHARS:,} characters (blank lines and lines starting with # are skipped)",
    )
    p.add_argument(
        "--out",
        type=Path,
        metavar="RESULTS",
        help="with --file or --each: write the table to this .csv or .md file "
        "(default: Markdown on stdout)",
    )
    p.add_argument(
        "--format", choices=("csv", "md"), help="with --file or --each: the table's format"
    )
    p.add_argument(
        "--conversation",
        metavar="ID",
        help="ask within this conversation (a name, or a window conversation's id): "
        "earlier turns are sent with the question and this turn is appended",
    )
    p.add_argument(
        "--each",
        metavar="PATH_OR_COLLECTION",
        help="ask the question of every document of a collection, a folder or a file: "
        "one row per document (answer, pages cited, or not stated)",
    )
    p.add_argument(
        "--whole-document",
        action="store_true",
        help="with --each: give the model each document's whole text where it fits",
    )
    p.add_argument(
        "--fresh",
        action="store_true",
        help="with --each: answer every document again, even unchanged ones",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("-k", "--k", type=int, default=5, help="how many passages to retrieve (1-50)")
    p.add_argument(
        "--keep-engine", action="store_true", help="leave an engine started for this call running"
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if not 1 <= args.k <= 50:
        return fail("--k must be between 1 and 50", code=2)
    if args.each is not None:
        return run_each(args)
    if args.whole_document or args.fresh:
        return fail("--whole-document and --fresh go with --each", code=2)
    if args.conversation is not None and args.file is not None:
        return fail("--conversation asks one question, not --file", code=2)
    if args.file is not None:
        return _run_file(args)
    if args.question is None:
        return fail("give a question, or --file QUESTIONS.txt", code=2)
    if args.out is not None or args.format is not None:
        return fail("--out and --format go with --file or --each", code=2)
    question = visible(args.question.strip(), keep="\t")
    if not question:
        return fail("the question is empty", code=2)
    if len(question) > MAX_QUESTION_CHARS:
        return fail(
            f"the question is {len(question):,} characters long; "
            f"questions may be at most {MAX_QUESTION_CHARS:,}",
            code=2,
        )
    try:
        conversation = (
            open_conversation(name=args.conversation) if args.conversation is not None else None
        )
    except ValueError as e:
        return fail(str(e), code=2)
    history = history_of(conversation.value) if conversation is not None else []
    try:
        with engine_session(keep=args.keep_engine, answers=True) as client:
            if args.json:
                answer = client.ask(question=question, k=args.k, history=history)
                if conversation is not None:
                    conversation.append(question=question, answer=answer, searched="")
                print(json.dumps(to_json_dict(answer), ensure_ascii=False))
                return 0
            return _stream(client, question=question, k=args.k, conversation=conversation)
    except (EngineUnavailableError, EngineRequestError) as e:
        return fail(str(e))


def _terminal() -> bool:
    """stdout is a terminal: the answer is worth watching as it is written."""
    return sys.stdout.isatty()


def _stream(client, *, question: str, k: int, conversation: CliConversation | None) -> int:  # type: ignore[no-untyped-def]
    """The answer as the window shows it: streamed on a terminal, and, when the engine
    marked its sentences' sources once it was written ([n] the model did not write),
    again with them; into a pipe or a file only the final text."""
    citations: list[Citation] = []
    searched = ""
    streamed: list[str] = []
    live = _terminal()
    history = history_of(conversation.value) if conversation is not None else []
    for ev in client.ask_stream(question=question, k=k, history=history):
        if isinstance(ev, SearchedEvent):
            searched = ev.shown()
            print(f"(searched for: {searched})", file=sys.stderr, flush=True)
        elif isinstance(ev, CitationsEvent):
            citations = ev.citations
        elif isinstance(ev, TokenEvent):
            streamed.append(ev.text)
            if live:
                print(visible(ev.text, keep="\n\t"), end="", flush=True)
        elif isinstance(ev, FailedEvent):
            if not live and streamed:
                print(visible("".join(streamed), keep="\n\t"), end="")
            print()
            return fail(visible(ev.message))
        elif isinstance(ev, DoneEvent):
            done = ev.done
            text = done.answer or "".join(streamed)
            if not live:
                print(visible(text, keep="\n\t"))
            elif text.strip() != "".join(streamed).strip():
                print("\n\nWith its sources marked:\n" + visible(text, keep="\n\t"))
            else:
                print()
            answer = Answer(answer=text, citations=citations, mode=done.mode, note=done.note)
            if conversation is not None:
                conversation.append(question=question, answer=answer, searched=searched)
            _sources(answer)
    return 0


def _sources(answer: Answer) -> None:
    if answer.citations:
        print("\nSources:")
    for c in answer.citations:
        where = visible(os.path.basename(c.path)) + (f", page {c.page}" if c.page else "")
        where += f", {visible(c.section)}" if c.section else ""
        snippet = visible(" ".join(c.text.split())[:100])
        print(f"  [{c.index}] {where}: {snippet}…")
    if answer.note:
        print(f"\n{visible(answer.note, keep=chr(10))}", file=sys.stderr)


# -- a file of questions ---------------------------------------------------------------


def _run_file(args: argparse.Namespace) -> int:
    """Exit 0 when every question was answered, 1 when one failed, 130 after Ctrl-C
    (the table then holds what was answered; the rest are marked not answered)."""
    if args.question is not None:
        return fail("give a question or --file, not both", code=2)
    if args.json:
        return fail("--json answers one question; with --file use --format csv or md", code=2)
    try:
        questions = read_questions(path=args.file)
        fmt = format_for(path=args.out, requested=args.format) if args.out else args.format or "md"
        if args.out is not None:
            check_writable(path=args.out)
    except (QuestionsError, ValueError) as e:
        return fail(str(e), code=2)

    interrupted = False
    try:
        with engine_session(keep=args.keep_engine, answers=True) as client:
            batch = BatchRun(
                questions=[q.text for q in questions],
                ask=lambda q: client.ask_stream(
                    question=q, k=args.k, priority="background", cancel=batch.cancel_event
                ),
                on_result=lambda result, done: _progress(batch=batch, result=result, done=done),
            )
            try:
                print(f"Answering {batch.total} questions…", file=sys.stderr)
                batch.start().wait()
            except KeyboardInterrupt:
                batch.cancel()
                interrupted = True
                print("\nInterrupted: keeping the answers so far.", file=sys.stderr)
            results = batch.results()
            elapsed = batch.elapsed_s()
    except (EngineUnavailableError, EngineRequestError) as e:
        return fail(str(e))

    if args.out is None:
        sys.stdout.write(render(results=results, fmt=fmt))
        sys.stdout.flush()
    else:
        try:
            write_results(path=args.out, results=results, fmt=fmt)
        except OSError as e:
            sys.stdout.write(render(results=results, fmt=fmt))  # nothing answered is lost
            return fail(f"could not write {args.out}: {e.strerror or e}; the table went to stdout")
        print(f"Wrote {args.out}", file=sys.stderr)
    print(f"{summary(results=results)} in {elapsed:.1f} s", file=sys.stderr)
    if interrupted:
        return 130
    return 0 if all(r.status == "answered" for r in results) else 1


def _progress(*, batch: BatchRun, result: BatchResult, done: int) -> None:
    what = (
        "" if result.status == "answered" else f" {result.status.upper()}: {visible(result.error)}"
    )
    print(
        f"[{done}/{batch.total}] {batch.elapsed_s():6.1f} s  #{result.number} "
        f"{elide(text=result.question, limit=60)}{what}",
        file=sys.stderr,
        flush=True,
    )
