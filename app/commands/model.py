"""`ragdoll model [PATH_OR_ID | --none]`: show or choose the language model."""

from __future__ import annotations

import argparse

from app.commands.session import engine_session, fail
from engine.errors import EngineRequestError, EngineUnavailableError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("model", help="show or choose the language model")
    p.add_argument(
        "model",
        nargs="?",
        help="a local folder with a Hugging Face causal LM, a .gguf file (Llama, "
        "Mistral, Qwen2), or a model id already in the Hugging Face cache",
    )
    p.add_argument("--none", action="store_true", help="no model: extractive answers")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        with engine_session(keep=False) as client:
            if args.none:
                client.set_model(model=None)
            elif args.model:
                client.set_model(model=args.model)
            settings = client.settings()
    except (EngineUnavailableError, EngineRequestError) as e:
        return fail(str(e))
    print(settings.model or "none (extractive answers)")
    return 0
