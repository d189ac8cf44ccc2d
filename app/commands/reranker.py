"""`ragdoll reranker [model|NAME|none]`: show or choose what re-orders each question's
candidates before they are cited.

- `model`: the language model in use reads the top 10 and ranks them by how likely it
  finds the question after each (engine/rag/answer/model_ranker.py); a second or two per
  question with a small model on a CPU, proportionally more with a larger one;
  nothing in extractive mode;
- a cross-encoder from a local folder, the Hugging Face cache, or a recommended
  reranker's repo id once the Models dialog downloaded it: it is loaded first, and
  one that does not load is not saved;
- `none`: retrieval's own order (the default).
"""

from __future__ import annotations

import argparse

from app.commands.session import engine_session, fail
from engine.errors import EngineRequestError, EngineUnavailableError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("reranker", help="show or choose what re-orders the retrieved passages")
    p.add_argument(
        "reranker",
        nargs="?",
        help='"model" (the language model in use ranks the top 10), a cross-encoder '
        "(local folder, a model id in the Hugging Face cache, or a recommended "
        'reranker downloaded from Recommended models), or "none"',
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        with engine_session() as client:
            settings = (
                client.set_reranker(reranker=args.reranker)
                if args.reranker is not None
                else client.settings()
            )
    except (EngineUnavailableError, EngineRequestError) as e:
        return fail(str(e))
    chosen = settings.reranker
    if chosen is None:
        print("reranker: none (retrieval's own order)")
    elif chosen == "model":
        model = settings.model or "none chosen: extractive answers are not re-ordered"
        print(f"reranker: the language model in use ({model})")
    else:
        print(f"reranker: {chosen}")
    return 0
