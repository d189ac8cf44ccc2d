"""The engine a command talks to: the running one, or one started for the call."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import PurePath

from engine.errors import EngineRequestError, EngineUnavailableError
from engine.paths import resolve_paths
from engine.service.client import EngineClient

# The longest a command waits for a chosen language model to load before it asks: a
# model streamed from a slow disk takes minutes; the answer is quoted after that.
MODEL_WAIT_S = 600.0
_SAY_EVERY_S = 15.0


@contextmanager
def engine_session(*, keep: bool = False, answers: bool = False) -> Iterator[EngineClient]:
    """Yield a client; an engine started here is stopped afterwards unless `keep`
    (also when the command is killed: it stops with this process). `answers`: the
    command asks questions, so a chosen model still loading is waited for first."""
    client = EngineClient.connect(paths=resolve_paths(), start=True, stop_with_caller=not keep)
    try:
        if answers:
            wait_for_model(client)
        yield client
    finally:
        if client.started_here and not keep:
            with suppress(EngineUnavailableError, EngineRequestError):
                client.shutdown()
        client.close()


def fail(message: str, *, code: int = 1) -> int:
    print(f"ragdoll: {message}", file=sys.stderr)
    return code


def wait_for_model(
    client: EngineClient,
    *,
    wait_s: float = MODEL_WAIT_S,
    poll_s: float = 0.5,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> None:
    """Wait while the chosen language model loads, saying so on stderr. An engine
    started for one `ragdoll ask` answered before its model was in, quoted with "ask
    again in a moment", and stopped: asked again, the same, so a written answer never
    came. Ends at once when no model is chosen or it failed (the answer says why)."""
    started = clock()
    said = None
    while True:
        status = client.status()
        if status.model is None or status.answer_mode == "generative" or status.model_error:
            return
        waited = clock() - started
        if waited >= wait_s:
            print(
                f"The language model is still loading after {waited:.0f} s; "
                "this answer is quoted from your documents.",
                file=sys.stderr,
            )
            return
        if said is None or waited - said >= _SAY_EVERY_S:
            name = PurePath(status.model).name or status.model
            print(
                f"Loading the language model ({name})… {waited:.0f} s",
                file=sys.stderr,
                flush=True,
            )
            said = waited
        sleep(poll_s)
