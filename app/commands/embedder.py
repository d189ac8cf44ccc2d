"""`ragdoll embedder [NAME|PATH] [--wait]`: show or choose the embedder.

Choosing one re-embeds the collection as a background job; questions use the
current index until the new one is complete. An engine started for the call is
left running so that the job goes on (a stopped engine resumes it at its next start).
"""

from __future__ import annotations

import argparse

from app.commands.session import engine_session, fail
from engine.errors import EngineRequestError, EngineUnavailableError
from engine.service.client import EngineClient


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("embedder", help="show or choose the embedder (re-embeds the collection)")
    p.add_argument(
        "embedder",
        nargs="?",
        help="a local sentence-transformers model folder, a model id already in the "
        "Hugging Face cache (e.g. intfloat/multilingual-e5-small, BAAI/bge-m3), a GGUF "
        "embedder file (nomic-embed-text, or a BERT one such as bge), or "
        "all-MiniLM-L6-v2 (the bundled default)",
    )
    p.add_argument("--wait", action="store_true", help="follow the re-embedding to its end")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        with engine_session(keep=True) as client:
            if args.embedder:
                client.set_embedder(embedder=args.embedder)
            code = _show(client)
            if args.wait:
                code = _follow(client) or code
    except (EngineUnavailableError, EngineRequestError) as e:
        return fail(str(e))
    return code


def _show(client: EngineClient) -> int:
    status = client.status()
    in_force = status.embedder_in_force or status.embedder
    print(f"embedder: {in_force}")
    if status.embedder_job is not None and status.embedder != in_force:
        p = client.ingest_progress(job_id=status.embedder_job)
        done = f"{p.chunks_embedded:,} of {p.chunks_found:,} chunks" if p.chunks_found else p.state
        print(f"switching to: {status.embedder} (re-embedding {done}; job {p.job_id})")
        print("questions use the current embedder's index until the new one is complete")
    elif status.embedder != in_force:
        print(f"chosen: {status.embedder} (re-embedding resumes when the engine starts)")
    return 0


def _follow(client: EngineClient) -> int:
    status = client.status()
    if status.embedder_job is None:
        return 0
    last = ""
    for p in client.ingest_events(job_id=status.embedder_job):
        line = f"{p.state}: {p.chunks_embedded:,} of {p.chunks_found:,} chunks"
        if line != last:
            print(line, flush=True)
            last = line
    final = client.ingest_progress(job_id=status.embedder_job)
    if final.state != "done":
        return fail(f"the re-embedding {final.state}: {final.message or ''}".strip())
    print(f"embedder: {client.status().embedder_in_force}")
    return 0
