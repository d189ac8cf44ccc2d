"""`ragdoll ask --each PATH_OR_COLLECTION "QUESTION"`: the question asked of every
document of a collection, a folder or one file, as a table (Markdown on stdout, or a
.csv / .md file with --out). Rows are printed to stderr as documents finish; Ctrl-C
keeps the rows done (the rest marked not answered) and exits 130."""

from __future__ import annotations

import argparse
import sys
import threading
from pathlib import Path

from app.batch.export import check_writable, format_for
from app.batch.questions import MAX_QUESTION_CHARS
from app.batch.visible import visible
from app.chat.answer_render import elide, file_name
from app.commands.session import engine_session, fail
from app.each.export import STATUS_WORDS, pages_text, render, write_rows
from app.each.runner import EachRun, summary_text
from engine.errors import EngineRequestError, EngineUnavailableError
from engine.rag.ingest.fspath import to_wire
from engine.wire_each import DocumentAnswer, EachRequest


def scope_for_engine(scope: str) -> str:
    """A path that exists here goes to the engine absolute (it does not share this
    working folder); anything else is taken for a collection's name."""
    path = Path(scope).expanduser()
    return to_wire(path.resolve()) if path.exists() else scope


def run_each(args: argparse.Namespace) -> int:
    """Exit 0 when every document got a row (answered or not stated), 1 when one
    failed, 2 for a bad request, 130 after Ctrl-C."""
    if args.question is None:
        return fail('give the question: ragdoll ask --each FOLDER "QUESTION"', code=2)
    if args.file is not None or args.conversation is not None or args.json:
        return fail("--each asks one question; not with --file, --conversation or --json", code=2)
    question = visible(args.question.strip(), keep="\t")
    if not question:
        return fail("the question is empty", code=2)
    if len(question) > MAX_QUESTION_CHARS:
        return fail(f"questions may be at most {MAX_QUESTION_CHARS:,} characters", code=2)
    try:
        fmt = format_for(path=args.out, requested=args.format) if args.out else args.format or "md"
        if args.out is not None:
            check_writable(path=args.out)
    except ValueError as e:
        return fail(str(e), code=2)
    request = EachRequest(
        question=question,
        scope=scope_for_engine(args.each),
        k=args.k,
        whole_document=args.whole_document,
        reuse=not args.fresh,
    )
    run = EachRun(on_row=lambda row: _progress(run=run, row=row))
    interrupted = False
    try:
        with engine_session(keep=args.keep_engine, answers=True) as client:
            errors: list[BaseException] = []

            def read() -> None:
                try:
                    run.read(client.ask_each_stream(request=request, cancel=run.cancel_event))
                except BaseException as e:  # handed to the main thread
                    errors.append(e)

            reader = threading.Thread(target=read, name="ragdoll-each-read", daemon=True)
            reader.start()
            try:
                while reader.is_alive():
                    reader.join(0.1)  # short waits: Ctrl-C reaches this thread
            except KeyboardInterrupt:
                run.cancel()
                interrupted = True
                print("\nInterrupted: keeping the rows so far.", file=sys.stderr)
                reader.join(5.0)
            if errors:
                raise errors[0]
    except EngineRequestError as e:
        return fail(str(e), code=2 if e.status == 400 else 1)
    except EngineUnavailableError as e:
        return fail(str(e))
    if run.plan is None:
        return fail(run.error or "the engine sent no documents")
    rows = run.rows()
    if args.out is None:
        sys.stdout.write(render(question=question, rows=rows, fmt=fmt))
        sys.stdout.flush()
    else:
        try:
            write_rows(path=args.out, question=question, rows=rows, fmt=fmt)
        except OSError as e:
            sys.stdout.write(render(question=question, rows=rows, fmt=fmt))
            return fail(f"could not write {args.out}: {e.strerror or e}; the table went to stdout")
        print(f"Wrote {args.out}", file=sys.stderr)
    if run.summary is not None:
        print(f"{summary_text(summary=run.summary)} in {run.elapsed_s():.1f} s", file=sys.stderr)
    if run.error:
        return fail(visible(run.error))
    if interrupted:
        return 130
    return 0 if all(r.status in ("answered", "not_stated") for r in rows) else 1


def _progress(*, run: EachRun, row: DocumentAnswer) -> None:
    if row.status == "cancelled":
        return
    pages = pages_text(row=row)
    where = f" (p. {pages})" if pages else ""
    tail = f": {visible(row.error)}" if row.error else ""
    reused = ", from the last run" if row.reused else ""
    print(
        f"[{run.finished()}/{run.total}] {elide(text=visible(file_name(path=row.path)), limit=50)}"
        f" — {STATUS_WORDS[row.status]}{where}{reused}{tail}",
        file=sys.stderr,
        flush=True,
    )
