"""What the engine bridge stands on: the engine op (one call as background work),
the default connection, error wording, and the one door from worker threads into Qt.

The bridge calls `engine.client.EngineClient` itself; tests hand in a subclass
(tests/app/fake_client.py), so the client's API is written down once."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from PySide6.QtCore import QObject, Signal, Slot

from app.door import Door
from app.qt_compat import emit
from engine.errors import EngineRequestError, EngineUnavailableError
from engine.paths import resolve_paths
from engine.service.client import EngineClient

T = TypeVar("T")

ClientFactory = Callable[[], EngineClient]
# In a worker: hand a step of progress to the GUI thread. False once nobody
# listens any more (the window closed): a long call should stop then.
Report = Callable[[Any], bool]


def _ignore(_value: object) -> None:
    return None


@dataclass(kw_only=True)
class LatestReads:
    """Repeated reads of one list (the documents, the watched folders, the status) run in
    workers of their own, so their results can arrive out of order. A result is applied
    only if no later read of its kind was applied first: a slow read issued before a
    folder's removal must not put back the documents the removal's own read took away.
    Used on the GUI thread only."""

    _issued: int = 0
    _applied: dict[str, int] = field(default_factory=dict)

    def ticket(self) -> int:
        self._issued += 1
        return self._issued

    def fresh(self, *, kind: str, ticket: int) -> bool:
        if ticket < self._applied.get(kind, 0):
            return False
        self._applied[kind] = ticket
        return True


@dataclass(frozen=True, kw_only=True)
class EngineOp(Generic[T]):
    """One engine call as background work, in the shape of Anki's QueryOp
    (qt/aqt/operations): `call(client)` runs in a worker; then, on the GUI thread,
    `success(result)`, or `failure(error)`. Without `failure` the bridge reports
    the error as `sig_error(what, message)`: failures are never swallowed.

    A call that takes long and has steps to show is a `follow(client, report)`
    instead: each `report(value)` reaches `progress(value)` on the GUI thread."""

    what: str  # what is being done, in words: the headline of its failure
    call: Callable[[EngineClient], T] | None = None
    follow: Callable[[EngineClient, Report], T] | None = None
    success: Callable[[T], object] = _ignore
    failure: Callable[[BaseException], object] | None = None
    progress: Callable[[Any], object] = _ignore

    def __post_init__(self) -> None:
        if (self.call is None) == (self.follow is None):
            raise ValueError("an EngineOp has either a call or a follow")

    def run(self, *, client: EngineClient, report: Report) -> T:
        """In the worker."""
        if self.follow is not None:
            return self.follow(client, report)
        assert self.call is not None
        return self.call(client)


def connect_default() -> EngineClient:
    """Attach to the person's engine, starting one if none runs: one that stops when
    this window's process ends, even without closing (killed, crashed), unless the
    person keeps it running to watch folders."""
    return EngineClient.connect(paths=resolve_paths(), start=True, stop_with_caller=True)


def describe_error(*, error: BaseException) -> str:
    """One line for a person: what failed, without a traceback."""
    text = str(error).strip() or type(error).__name__
    if isinstance(error, EngineRequestError):
        return text
    if isinstance(error, EngineUnavailableError):
        return f"The engine is not running: {text}"
    return f"{type(error).__name__}: {text}"


class MainThreadInvoker(QObject):
    """Runs closures on the thread this object lives in (the GUI thread).

    A signal emitted from a worker thread to a receiver in the GUI thread is
    queued by Qt, which is the whole trick: workers never touch widgets. Posting
    goes through a Door, shut for good on `close` or when the invoker is destroyed,
    so that no worker emits on a deleted object."""

    sig_call = Signal(object)

    def __init__(self, *, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.door = Door()
        # A plain object's method: Qt does not call back into one being destroyed.
        self.destroyed.connect(self.door.close)
        self.sig_call.connect(self._run)

    @property
    def closed(self) -> bool:
        return not self.door.is_open

    def post(self, fn: Callable[[], None]) -> bool:
        """Run `fn` on the GUI thread soon; False (and nothing runs) once closed."""
        posted = False

        def send() -> None:
            nonlocal posted
            emit(self.sig_call, fn)
            posted = True

        self.door.call(send)
        return posted

    def close(self) -> None:
        self.door.close()

    @Slot(object)
    def _run(self, fn: Callable[[], None]) -> None:
        fn()
