"""The engine a command talks to: the running one, or one started for the call."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager, suppress

from engine.errors import EngineRequestError, EngineUnavailableError
from engine.paths import resolve_paths
from engine.service.client import EngineClient


@contextmanager
def engine_session(*, keep: bool = False) -> Iterator[EngineClient]:
    """Yield a client; an engine started here is stopped afterwards unless `keep`
    (also when the command is killed: it stops with this process)."""
    client = EngineClient.connect(paths=resolve_paths(), start=True, stop_with_caller=not keep)
    try:
        yield client
    finally:
        if client.started_here and not keep:
            with suppress(EngineUnavailableError, EngineRequestError):
                client.shutdown()
        client.close()


def fail(message: str, *, code: int = 1) -> int:
    print(f"ragdoll: {message}", file=sys.stderr)
    return code
