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
    p.add_argument(
        "--weights",
        choices=("auto", "int8", "int4", "bf16", "f32"),
        help="how the weights are held: as stored (auto), compressed once into the cache "
        "(int8 = Q8_0, int4 = Q4_0 blocks; safetensors models), or computed in bf16/f32",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        with engine_session(keep=False) as client:
            if args.none:
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
    if settings.model:
        print(f"{settings.model} (weights: {settings.model_weights})")
    else:
        print("none (extractive answers)")
    return 0
