"""`ragdoll status`: is an engine running, and what does it hold."""

from __future__ import annotations

import argparse
import json

from app.commands.embedder import server_line
from app.commands.session import fail
from engine.errors import EngineRequestError, EngineUnavailableError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("status", help="show the running engine's state")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from engine.paths import resolve_paths
    from engine.service.client import EngineClient
    from engine.wire import to_json_dict

    paths = resolve_paths()
    try:
        with EngineClient.connect(paths=paths, start=False) as client:
            status = client.status()
    except (EngineUnavailableError, EngineRequestError) as e:
        return fail(str(e))
    if args.json:
        print(json.dumps(to_json_dict(status)))
        return 0
    print(
        f"engine {status.version} (pid {status.pid})\n"
        f"documents: {status.documents}, chunks: {status.chunks}\n"
        f"embedder: {status.embedder}\n"
        f"answers: {status.answer_mode}" + (f" with {status.model}" if status.model else "")
    )
    if status.model_error:
        print(f"model not in use: {status.model_error}")
    if status.server is not None:  # passages go there: say so wherever the model is named
        latency = status.server.first_token_ms
        print(
            f"model server: {status.server.url} (passages of your documents are sent there)"
            + (f", first token {latency:.0f} ms" if latency is not None else "")
        )
    if status.embed_server is not None:  # the documents' text goes there: say so
        print(server_line(status.embed_server))
    if status.languages:
        print(f"languages: {', '.join(status.languages)}")
    offer = status.embedder_offer
    if offer is not None:
        why = (
            f"questions asked in {', '.join(offer.asked)}"
            if offer.for_questions
            else f"documents in {', '.join(offer.languages)}"
        )
        print(
            f"offered: {offer.repo_id} ({offer.download_bytes / 1e6:.0f} MB download), which "
            f"reads {why} (accept it in the window: Model…)"
        )
    print(f"data: {paths.data}")
    return 0
