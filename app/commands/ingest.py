"""`ragdoll ingest PATH...`: add files or folders and wait until they are in."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from app.batch.visible import visible
from app.commands.session import engine_session, fail
from engine.errors import EngineRequestError, EngineUnavailableError
from engine.wire import IngestProgress


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "ingest",
        help="add files or folders to the collection",
        description="Ingest files or folders and return when done. The folders named "
        "(a file's folder, for a file) become watched folders: the engine reads only "
        "inside those. Exit code 0: all ingested; 2: done, but some files could not be "
        "read (listed); 1: failed.",
    )
    p.add_argument("paths", nargs="+", metavar="PATH")
    p.add_argument(
        "--keep-engine", action="store_true", help="leave an engine started for this call running"
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    last: IngestProgress | None = None
    try:
        with engine_session(keep=args.keep_engine) as client:
            job = client.add_paths(paths=[Path(p) for p in args.paths])  # files of this machine
            last = job
            for progress in client.ingest_events(job_id=job.job_id):
                _show(progress)
                last = progress
    except EngineUnavailableError as e:
        if last is None:
            return fail(str(e))
        if sys.stderr.isatty():
            print(file=sys.stderr)
        # The job is kept on disk until it ends (engine/rag/ingest/jobs.py, PendingJobs).
        return fail(
            f"the engine stopped during the ingestion ({last.files_done} of "
            f"{last.files_total} files done, kept); the rest is ingested when the engine "
            "next starts (`ragdoll ingest` again, or open the window)"
        )
    except EngineRequestError as e:
        return fail(str(e))
    except KeyboardInterrupt:
        return fail("interrupted; files already ingested are kept", code=130)
    if sys.stderr.isatty():
        print(file=sys.stderr)
    return _summary(last)


def _show(p: IngestProgress) -> None:
    if not sys.stderr.isatty() or p.files_total == 0:
        return
    current = visible(p.current or "")[-50:]
    print(
        f"\r{p.files_done}/{p.files_total} files  {p.pages_read} pages  "
        f"{p.chunks_embedded}/{p.chunks_found} chunks embedded  {current:<50}",
        end="",
        file=sys.stderr,
        flush=True,
    )


def _summary(p: IngestProgress) -> int:
    print(
        f"{p.files_total} files: {p.files_indexed} ingested, {p.files_skipped} unchanged, "
        f"{len(p.errors)} errors; {p.chunks_added} chunks added"
    )
    for e in p.errors:
        print(f"  error: {visible(e.path)}: {visible(e.reason)}")
    for n in p.notes:
        print(f"  note: {visible(n.path)}: {visible(n.note)}")
    if p.disk_full is not None:
        return fail(p.message or "the disk holding the index is full")
    if p.state == "cancelled":
        why = p.message or "it was cancelled from the window or by another client"
        return fail(f"ingestion cancelled: {why}; files already ingested are kept")
    if p.state != "done":
        why = p.message or "no reason given; see `ragdoll status` and the engine log"
        return fail(f"ingestion {p.state}: {why}")
    return 2 if p.errors else 0
