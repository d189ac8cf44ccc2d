"""`ragdoll model [PATH_OR_ID | --none | --server URL --name MODEL]`: show or choose the
language model, local or on an OpenAI-compatible model server."""

from __future__ import annotations

import argparse

from app.commands.server_args import add_key_and_ca, print_server_models
from app.commands.session import engine_session, fail
from engine.errors import EngineRequestError, EngineUnavailableError
from engine.rag.answer.server_key import read_key_file
from engine.service.client import EngineClient
from engine.wire import EngineSettings


def sent_notice(url: str) -> str:
    """What a person must know before a server writes the answers."""
    return (
        f"Passages of your documents and your questions are sent to {url} to write "
        "the answers. Retrieval and your index stay on this machine."
    )


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("model", help="show or choose the language model")
    p.add_argument(
        "model",
        nargs="?",
        help="a local folder with a Hugging Face causal LM, a .gguf file (Llama, "
        "Mistral, Qwen2), or a model id already in the Hugging Face cache",
    )
    p.add_argument("--none", action="store_true", help="no model: extractive answers")
    p.add_argument(
        "--weights",
        choices=("auto", "int8", "int4", "bf16", "f32"),
        help="how the weights are held: as stored (auto), compressed once into the cache "
        "(int8 = Q8_0, int4 = Q4_0 blocks; safetensors models), or computed in bf16/f32",
    )
    p.add_argument(
        "--server",
        metavar="URL",
        help="generate on an OpenAI-compatible model server (vLLM, Ollama, llama.cpp's "
        "server), e.g. http://localhost:8000; alone, lists the models it serves. "
        "Passages of your documents are sent to it",
    )
    p.add_argument("--name", metavar="MODEL", help="the server's model to answer with")
    add_key_and_ca(p)
    p.add_argument(
        "--concurrency",
        type=int,
        metavar="N",
        help="requests in flight at once on the server (default 8)",
    )
    p.add_argument(
        "--first-token-timeout",
        type=float,
        metavar="SECONDS",
        help="how long an answer may wait for the server's first token (default 120; "
        "a CPU server with long prompts needs more)",
    )
    p.set_defaults(func=run)


def _server(args: argparse.Namespace, client: EngineClient) -> EngineSettings | None:
    """List the server's models (no --name), or generate on it. None: listed."""
    key = read_key_file(args.api_key_file) if args.api_key_file else None
    if not args.name:
        print_server_models(
            client=client,
            url=args.server,
            api_key=key,
            ca_file=args.ca_file,
            choose="ragdoll model --server URL --name MODEL",
        )
        return None
    print(sent_notice(args.server))
    return client.set_model_server(
        url=args.server,
        model=args.name,
        api_key=key,
        ca_file=args.ca_file,
        concurrency=args.concurrency,
        first_token_s=args.first_token_timeout,
    )


def run(args: argparse.Namespace) -> int:
    try:
        with engine_session(keep=False) as client:
            if args.server:
                if _server(args, client) is None:
                    return 0
            elif args.name or args.api_key_file:
                return fail("--name and --api-key-file go with --server URL")
            elif args.none:
                client.set_model(model=None)
            elif args.model:
                client.set_model(model=args.model, weights=args.weights)
            elif args.weights:
                current = client.settings().model
                if not current:
                    return fail("choose a model first: ragdoll model PATH --weights ...")
                client.set_model(model=current, weights=args.weights)
            settings = client.settings()
    except (EngineUnavailableError, EngineRequestError) as e:
        return fail(str(e))
    except (OSError, ValueError) as e:  # the key file
        return fail(f"the API key file could not be read: {e}")
    if settings.server_url:
        print(f"{settings.server_model} on {settings.server_url} (model server)")
        print(sent_notice(settings.server_url))
    elif settings.model:
        print(f"{settings.model} (weights: {settings.model_weights})")
    else:
        print("none (extractive answers)")
    return 0
