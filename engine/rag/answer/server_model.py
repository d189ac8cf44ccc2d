"""A model server put to use as the generator: checked (it answers, it serves the
model named), then given to the engine as a ModelInUse with no placement owner,
since nothing of the model is placed on this machine."""

from __future__ import annotations

from engine.rag.answer.in_use import ModelInUse
from engine.rag.answer.remote import DEFAULT_SERVER_CONTEXT, RemoteAnswerer
from engine.rag.answer.server_client import ModelServerError, ServerEndpoint, list_models


def open_server(*, endpoint: ServerEndpoint, concurrency: int = 8) -> ModelInUse:
    """The server's model as the generator. Raises ModelServerError when the server
    cannot be reached, refuses the key, or does not serve `endpoint.model`."""
    if not endpoint.model:
        raise ModelServerError("name the model the server should answer with")
    served = list_models(endpoint=endpoint)
    entry = next((m for m in served if m.id == endpoint.model), None)
    # llama.cpp's server lists the one file it serves under a name of its own, and
    # answers whatever name is asked; a list naming others is a plain refusal.
    if entry is None and len(served) != 1:
        names = ", ".join(m.id for m in served) or "nothing"
        raise ModelServerError(
            f"the model server at {endpoint.url} has no model {endpoint.model!r} "
            f"(it serves: {names})"
        )
    context = entry.context_length if entry is not None else None
    answerer = RemoteAnswerer(
        endpoint=endpoint,
        context_length=context or DEFAULT_SERVER_CONTEXT,
        concurrency=concurrency,
    )
    return ModelInUse(owner=None, answerer=answerer)
