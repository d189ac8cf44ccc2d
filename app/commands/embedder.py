"""`ragdoll embedder [NAME|PATH | --server URL --name MODEL] [--wait]`: show or choose
the embedder, local or on an OpenAI-compatible embeddings server.

Choosing one re-embeds the collection as a background job; questions use the
current index until the new one is complete. An engine started for the call is
left running so that the job goes on (a stopped engine resumes it at its next start).
"""

from __future__ import annotations

import argparse

from app.commands.server_args import add_key_and_ca, print_server_models
from app.commands.session import engine_session, fail
from engine.errors import EngineRequestError, EngineUnavailableError
from engine.rag.answer.server_key import read_key_file
from engine.service.client import EngineClient
from engine.wire import EmbedServerInfo


def embed_sent_notice(url: str) -> str:
    """What a person must know before a server embeds the collection."""
    return (
        f"The text of your documents (every chunk) and your questions are sent to {url} "
        "to be embedded. Your files and index stay on this machine."
    )


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
    p.add_argument(
        "--server",
        metavar="URL",
        help="embed on an OpenAI-compatible embeddings server (vLLM --task embed, Ollama, "
        "Hugging Face TEI, llama.cpp's server --embedding); alone, lists its models. "
        "The text of your documents is sent to it",
    )
    p.add_argument("--name", metavar="MODEL", help="the server's embedding model")
    add_key_and_ca(p)
    p.add_argument("--batch", type=int, metavar="N", help="texts a request (default 32)")
    p.add_argument(
        "--timeout",
        type=float,
        metavar="SECONDS",
        help="how long a request may wait for its vectors (default 60)",
    )
    p.add_argument("--wait", action="store_true", help="follow the re-embedding to its end")
    p.set_defaults(func=run)


def _server(args: argparse.Namespace, client: EngineClient) -> bool:
    """List the server's models (no --name: False), or embed on it (True)."""
    key = read_key_file(args.api_key_file) if args.api_key_file else None
    if not args.name:
        print_server_models(
            client=client,
            url=args.server,
            api_key=key,
            ca_file=args.ca_file,
            choose="ragdoll embedder --server URL --name MODEL",
        )
        return False
    print(embed_sent_notice(args.server))
    client.set_embedder_server(
        url=args.server,
        model=args.name,
        api_key=key,
        ca_file=args.ca_file,
        batch=args.batch,
        timeout_s=args.timeout,
    )
    return True


def run(args: argparse.Namespace) -> int:
    if not args.server and (args.name or args.api_key_file or args.batch or args.timeout):
        return fail("--name, --api-key-file, --batch and --timeout go with --server URL")
    try:
        with engine_session(keep=True) as client:
            if args.server:
                if not _server(args, client):
                    return 0
            elif args.embedder:
                client.set_embedder(embedder=args.embedder)
            job = _show(client)
            code = _follow(client, job_id=job) if args.wait and job is not None else 0
    except (EngineUnavailableError, EngineRequestError) as e:
        return fail(str(e))
    except (OSError, ValueError) as e:  # the key file
        return fail(f"the API key file could not be read: {e}")
    return code


def server_line(server: EmbedServerInfo) -> str:
    """The embeddings server as `ragdoll status` and `ragdoll embedder` name it."""
    return (
        f"embeddings server: {server.model} on {server.url} "
        "(the text of your documents is sent there)"
    )


def _show(client: EngineClient) -> str | None:
    """Print the embedder in force and any switch; return the switch's job, if one runs."""
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
    if status.embed_server is not None:
        print(server_line(status.embed_server))
    return status.embedder_job


def _follow(client: EngineClient, *, job_id: str) -> int:
    # The job seen by `_show`, not a fresh status: a short switch can finish in between,
    # and the status then names no job although the embedder line was never printed.
    last = ""
    for p in client.ingest_events(job_id=job_id):
        line = f"{p.state}: {p.chunks_embedded:,} of {p.chunks_found:,} chunks"
        if line != last:
            print(line, flush=True)
            last = line
    final = client.ingest_progress(job_id=job_id)
    if final.state != "done":
        return fail(f"the re-embedding {final.state}: {final.message or ''}".strip())
    print(f"embedder: {client.status().embedder_in_force}")
    return 0
