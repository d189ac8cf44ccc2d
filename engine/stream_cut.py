"""Ending a streamed response from another thread: the client's side of Stop.

A reader blocked in a read (an answer waiting in the engine's queue sends nothing
until its turn) never looks at a flag, and an httpx response cannot be closed from
another thread while it reads. Shutting the connection's socket down can: the read
returns at once, the reader's loop ends, and the engine sees the client leave
(engine/service/api/lifecycle.py `until_disconnect` turns that into the answer's cancel).
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator
from typing import Any

WATCH_POLL_S = 0.05  # how often the watcher looks at the caller's cancel


@contextlib.contextmanager
def cut_on(*, cancel: threading.Event | None, response: Any) -> Iterator[None]:
    """While inside, `cancel` being set shuts `response`'s connection down (a
    response without a socket, an in-process test transport, is left alone)."""
    if cancel is None:
        yield
        return
    sock = _socket_of(response)
    over = threading.Event()

    def watch() -> None:
        while not over.is_set():
            if cancel.wait(WATCH_POLL_S):
                if not over.is_set() and sock is not None:
                    with contextlib.suppress(OSError):
                        sock.shutdown(socket.SHUT_RDWR)
                return

    watcher = threading.Thread(target=watch, name="ragdoll-stream-cut", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        over.set()


def _socket_of(response: Any) -> socket.socket | None:
    stream = getattr(response, "extensions", {}).get("network_stream")
    if stream is None:
        return None
    try:
        sock = stream.get_extra_info("socket")
    except Exception:  # a transport without that information
        return None
    return sock if isinstance(sock, socket.socket) else None
