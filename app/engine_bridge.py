"""The GUI's one facade onto the engine.

Every EngineClient call blocks (HTTP on loopback, sometimes seconds: loading a
model, a first ask), so none runs on the GUI thread. A call is an EngineOp
(app/bridge_plumbing.py, Anki's QueryOp shape): `run(op)` runs it in a daemon
thread, then its success or failure runs on the GUI thread. Daemon threads
rather than a QThreadPool: a stream stuck in a read must never keep the app from
quitting, and QThreadPool waits for its runnables on exit. What the whole window
follows (the connection, the status, the library, ingestion jobs) the bridge
announces with `sig_*` signals; an answer is fed into its AnswerStream (`ask`).

Asking (one question, a batch, each document) is app/asking.py; jobs are followed
with app/job_follower.py.

Failures are never swallowed: a worker logs the traceback and the op's failure
runs, or `sig_error` with a message a person can read.

The bridge also keeps the engine alive: it probes it every few seconds, and when
the engine has died (a crash, kill -9) it says so (`sig_engine_lost`), starts a
new one and reports back (`sig_engine_restarted`). The index is on disk, so
nothing indexed is lost; an answer being streamed fails and can be asked again.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import TypeVar

from PySide6.QtCore import QObject, QTimer, Signal

from app import asking
from app.batch.runner import BatchResult, BatchRun
from app.bridge_plumbing import (
    ClientFactory,
    EngineOp,
    LatestReads,
    MainThreadInvoker,
    connect_default,
    describe_error,
)
from app.chat.answer_stream import AnswerStream
from app.each.runner import EachRun
from app.job_follower import follow_job, jobs_to_adopt
from app.qt_compat import emit, emit_drops_a_reference
from engine.errors import EngineUnavailableError
from engine.service.client import EngineClient, grant_folders
from engine.wire import (
    EmbedderOffer,
    EngineSettings,
    EngineStatus,
    IngestProgress,
    IngestQueueState,
    ProfilingStatus,
    ServerSettings,
)
from engine.wire_each import DocumentAnswer, EachPlan, EachRequest

log = logging.getLogger(__name__)

T = TypeVar("T")

HEALTH_INTERVAL_MS = 2000
# More deaths than this within the window: something is wrong that a restart
# does not fix (a broken install); stop trying and say so.
MAX_RESTARTS = 3
RESTART_WINDOW_S = 120.0


class EngineBridge(QObject):
    """Runs engine calls off the GUI thread and reports back with signals."""

    sig_connecting = Signal()
    sig_connected = Signal(object)  # EngineStatus
    sig_connect_failed = Signal(str)
    sig_status = Signal(object)  # EngineStatus
    sig_documents = Signal(object)  # list[DocumentInfo]
    sig_file_errors = Signal(object)  # list[FileError], the engine's persistent list
    sig_ingest_progress = Signal(object)  # IngestProgress
    sig_ingest_finished = Signal(object)  # IngestProgress, in a final state
    sig_ingest_paused = Signal(bool)  # whether the engine's ingestion queue is paused
    sig_ingest_not_started = Signal()  # adding documents failed before its job ran
    sig_folders = Signal(object)  # list[WatchedFolder]
    sig_model_busy = Signal(bool)
    sig_model_changed = Signal(object)  # EngineSettings
    sig_model_failed = Signal(str)
    sig_error = Signal(str, str)  # what was being done, why it failed
    sig_engine_lost = Signal(str)  # the engine died; a new one is being started
    sig_engine_restarted = Signal(object)  # EngineStatus of the new engine
    sig_keep_running = Signal(bool)  # whether quitting leaves the engine running

    def __init__(
        self,
        *,
        client_factory: ClientFactory = connect_default,
        health_interval_ms: int = HEALTH_INTERVAL_MS,
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self._client_factory = client_factory
        self._client: EngineClient | None = None
        self._started_engine = False
        self._connecting = False
        self._keep_running = False
        self._probing = False
        self._restarting = False
        self._restarts: list[float] = []
        self._probed_profiling: ProfilingStatus | None = None
        self._probed_offer: EmbedderOffer | None = None
        self._health = QTimer(self)
        self._health.setInterval(health_interval_ms)
        self._health.timeout.connect(self._probe)
        emit_drops_a_reference()  # probe on the GUI thread, before any worker emits
        self._invoker = MainThreadInvoker(parent=self)
        # Shut the door even if the bridge is deleted without close().
        self.destroyed.connect(self._invoker.door.close)
        self._post = self._invoker.post
        self._followed: set[str] = set()  # jobs adopted (not asked for here) already followed
        self._queue_paused: bool | None = None
        self._counts: tuple[int, int] | None = None  # documents, chunks at the last status
        self._reads = LatestReads()

    # -- state ---------------------------------------------------------------

    @property
    def connected(self) -> bool:
        return self._client is not None

    @property
    def started_engine(self) -> bool:
        return self._started_engine

    @property
    def keep_running(self) -> bool:
        return self._keep_running

    @property
    def restarting(self) -> bool:
        return self._restarting

    # -- plumbing --------------------------------------------------------------

    def _closed(self) -> bool:
        return self._invoker.closed

    def _spawn(self, *, name: str, target: Callable[[], None]) -> None:
        threading.Thread(target=target, name=f"ragdoll-gui-{name}", daemon=True).start()

    def run(self, op: EngineOp[T]) -> bool:
        """Run `op` in a worker (see EngineOp). False, with the failure reported at
        once, when the engine is not connected."""
        client = self._client
        if client is None:
            if op.failure is None:
                emit(self.sig_error, op.what, "The engine is not connected yet.")
            else:
                op.failure(EngineUnavailableError("the engine is not connected yet"))
            return False

        def report(value: object) -> bool:
            return self._post(lambda: op.progress(value))

        def work() -> None:
            try:
                value = op.run(client=client, report=report)
            except Exception as e:
                log.exception("engine call failed: %s", op.what)
                self._post(lambda err=e: self._fail(op=op, error=err))
                return
            self._post(lambda: op.success(value))

        self._spawn(name=op.what, target=work)
        return True

    def _submit(
        self,
        *,
        what: str,
        call: Callable[[EngineClient], T],
        on_result: Callable[[T], object],
        on_error: Callable[[BaseException], object] | None = None,
    ) -> bool:
        """The bridge's own shorthand for `run(EngineOp(...))`."""
        return self.run(EngineOp(what=what, call=call, success=on_result, failure=on_error))

    def _fail(self, *, op: EngineOp[T], error: BaseException) -> None:
        if op.failure is not None:
            op.failure(error)
        else:
            emit(self.sig_error, op.what, describe_error(error=error))

    # -- connection -------------------------------------------------------------

    def connect_engine(self) -> None:
        """Attach to (or start) the engine in the background."""
        if self._connecting or self._client is not None:
            return
        self._connecting = True
        emit(self.sig_connecting)
        factory = self._client_factory

        def work() -> None:
            try:
                client = factory()
                status = client.status()
            except Exception as e:
                log.exception("could not connect to the engine")
                self._post(lambda err=e: self._connect_failed(error=err))
                return
            try:
                queue: IngestQueueState | None = client.ingest_queue()
            except Exception:
                log.exception("reading the ingestion queue at connection failed")
                queue = None  # the probe reads it again
            self._post(lambda: self._connect_done(client=client, status=status, queue=queue))

        self._spawn(name="connect", target=work)

    def _connect_done(
        self, *, client: EngineClient, status: EngineStatus, queue: IngestQueueState | None = None
    ) -> None:
        self._connecting = False
        self._client = client
        # Only an engine this window started is stopped when it closes: one the
        # CLI or another window started must outlive us.
        self._started_engine = client.started_here
        restarted, self._restarting = self._restarting, False
        emit(self.sig_connected, status)
        if restarted:
            emit(self.sig_engine_restarted, status)
        self._counts = (status.documents, status.chunks)
        emit(self.sig_status, status)
        if queue is not None:
            # Whatever runs already was not asked for by this window: a job an
            # earlier window asked for that the engine resumed at its start too.
            self._adopt_jobs(queue=queue, every_origin=True)
        self.refresh_library()
        self.refresh_keep_running()
        self._health.start()

    def _connect_failed(self, *, error: BaseException) -> None:
        self._connecting = False
        self._restarting = False
        emit(self.sig_connect_failed, describe_error(error=error))

    # -- keeping the engine alive ---------------------------------------------------

    def _probe(self) -> None:
        """Is the engine still there? Runs off the GUI thread; one probe at a time."""
        client = self._client
        if client is None or self._probing or self._invoker.closed:
            return
        self._probing = True

        def work() -> None:
            queue: IngestQueueState | None = None
            status: EngineStatus | None = None
            try:
                alive = client.alive(timeout_s=5.0)
                if alive:
                    queue = client.ingest_queue()
                    status = client.status()
            except Exception:
                log.exception("probing the engine failed")
                alive = True  # a bug in the probe is no reason to restart the engine
            self._post(lambda: self._probed(client=client, alive=alive, queue=queue, status=status))

        self._spawn(name="probe", target=work)

    def _probed(
        self,
        *,
        client: EngineClient,
        alive: bool,
        queue: IngestQueueState | None = None,
        status: EngineStatus | None = None,
    ) -> None:
        self._probing = False
        if not alive and client is self._client:
            self._engine_lost()
            return
        if client is not self._client:
            return
        if queue is not None:
            self._adopt_jobs(queue=queue)
        if status is not None:
            counts_changed = self._counts_changed(status=status)
            if counts_changed:
                # A job the probe never saw running (a small change, done between
                # two probes) still changed the library: show it.
                self.refresh_library()
            # The engine starts timing the machine by itself once idle: the banner,
            # the status bar and the panes follow its progress too; and it offers the
            # multilingual embedder once questions come in another language.
            changed = (
                status.profiling != self._probed_profiling
                or status.embedder_offer != self._probed_offer
            )
            if counts_changed or changed:
                self._probed_profiling = status.profiling
                self._probed_offer = status.embedder_offer
                emit(self.sig_status, status)

    def _counts_changed(self, *, status: EngineStatus) -> bool:
        counts = (status.documents, status.chunks)
        changed = self._counts is not None and counts != self._counts
        self._counts = counts
        return changed

    def _adopt_jobs(self, *, queue: IngestQueueState, every_origin: bool = False) -> None:
        """Follow the jobs the engine started itself, so that the window shows a
        watched folder being updated as it shows a folder the person added. At
        connection (`every_origin`) every job: none of them is this window's."""
        if queue.paused != self._queue_paused:
            self._queue_paused = queue.paused
            emit(self.sig_ingest_paused, queue.paused)
        for job in jobs_to_adopt(queue=queue, followed=self._followed, every_origin=every_origin):
            self._followed.add(job.job_id)
            emit(self.sig_ingest_progress, job)
            self._submit(
                what="Following a watched folder",
                call=lambda c, first=job: self._follow(client=c, last=first),
                on_result=self._job_finished,
                # The probe finds the job again if the engine is still there.
                on_error=lambda e, j=job.job_id: self._followed.discard(j),
            )

    def _engine_lost(self) -> None:
        """The engine died: say so, forget it, start a new one."""
        self._health.stop()
        client, self._client = self._client, None
        if client is not None:
            self._spawn(name="close", target=client.close)
        now = time.monotonic()
        self._restarts = [t for t in self._restarts if now - t < RESTART_WINDOW_S] + [now]
        if len(self._restarts) > MAX_RESTARTS:
            emit(
                self.sig_connect_failed,
                f"The engine stopped {len(self._restarts)} times within "
                f"{RESTART_WINDOW_S:.0f} s, so it was not restarted again.",
            )
            return
        emit(self.sig_engine_lost, "The engine stopped unexpectedly. Restarting it…")
        self._restarting = True
        self.connect_engine()

    def refresh_keep_running(self) -> None:
        self._submit(
            what="Reading the engine settings",
            call=lambda c: c.server_settings(),
            on_result=self._keep_running_read,
        )

    def set_keep_running(self, *, keep: bool) -> None:
        """Whether quitting the window leaves the engine running (to keep watching
        folders). Stored by the engine, so that the choice survives restarts."""
        self._submit(
            what="Saving the engine settings",
            call=lambda c: c.set_server_settings(keep_engine_running=keep),
            on_result=self._keep_running_read,
        )

    def _keep_running_read(self, settings: ServerSettings) -> None:
        self._keep_running = settings.keep_engine_running
        emit(self.sig_keep_running, settings.keep_engine_running)

    # -- plain calls -----------------------------------------------------------

    def refresh_status(self) -> None:
        ticket = self._reads.ticket()
        self._submit(
            what="Reading the engine status",
            call=lambda c: c.status(),
            on_result=lambda status: (
                self._reads.fresh(kind="status", ticket=ticket) and self._status_read(status)
            ),
        )

    def _status_read(self, status: EngineStatus) -> None:
        self._counts = (status.documents, status.chunks)
        emit(self.sig_status, status)

    def skip_profiling(self) -> None:
        """Decline active profiling; the status that follows hides its banner."""
        self._submit(
            what="Skipping the machine timing",
            call=lambda c: c.skip_profiling(),
            on_result=lambda _: self.refresh_status(),
        )

    def refresh_library(self) -> None:
        """Watched folders, documents and the engine's list of files it could not read;
        an answer older than one already shown is dropped (`LatestReads`)."""
        ticket = self._reads.ticket()
        for kind, what, call, signal in (
            ("folders", "Listing watched folders", lambda c: c.folders(), self.sig_folders),
            ("documents", "Listing documents", lambda c: c.documents(), self.sig_documents),
            ("errors", "Listing unreadable files", lambda c: c.errors(), self.sig_file_errors),
        ):
            self._submit(
                what=what,
                call=call,
                on_result=lambda value, kind=kind, signal=signal: (
                    self._reads.fresh(kind=kind, ticket=ticket) and emit(signal, value)
                ),
            )

    def set_model(self, *, model: str | None) -> None:
        """Switch the answer model; loading one can take many seconds."""

        def done(settings: EngineSettings) -> None:
            emit(self.sig_model_busy, False)
            emit(self.sig_model_changed, settings)
            self.refresh_status()

        def failed(error: BaseException) -> None:
            emit(self.sig_model_busy, False)
            emit(self.sig_model_failed, describe_error(error=error))

        if self._submit(
            what="Changing the model",
            call=lambda c: c.set_model(model=model),
            on_result=done,
            on_error=failed,
        ):
            emit(self.sig_model_busy, True)

    def set_embedder(self, *, embedder: str) -> None:
        """Switch the embedder: the engine loads it, then re-embeds the collection
        as a job shown like ingestion, while the current index answers."""

        def follow(client: EngineClient) -> IngestProgress | None:
            settings = client.set_embedder(embedder=embedder)
            self._post(lambda: emit(self.sig_model_changed, settings))
            job = client.status().embedder_job
            if job is None:
                return None
            return self._follow(client=client, last=client.ingest_progress(job_id=job))

        def done(progress: IngestProgress | None) -> None:
            if progress is not None:
                self._job_finished(progress)
            else:
                self.refresh_status()

        self._submit(
            what="Changing the embedder",
            call=follow,
            on_result=done,
            on_error=lambda e: emit(
                self.sig_error, "Changing the embedder", describe_error(error=e)
            ),
        )

    # -- ingestion ---------------------------------------------------------------

    def ingest(self, *, paths: list[str]) -> None:
        """Queue files or folders and follow the job's progress to its end."""

        def follow(client: EngineClient) -> IngestProgress:
            # The folders the person picked become watched folders: the engine
            # reads nothing outside them.
            grant_folders(client=client, paths=paths)
            return self._follow(client=client, last=client.ingest(paths=paths))

        self._submit(
            what="Adding documents",
            call=follow,
            on_result=self._job_finished,
            on_error=lambda e: self._not_started(what="Adding documents", error=e),
        )

    def add_folder(self, *, path: str, collection: str) -> None:
        """Watch a folder in a collection and index it, following the job to its end."""

        def follow(client: EngineClient) -> IngestProgress:
            added = client.add_folder(path=path, collection=collection, ingest=True)
            self._post(self.refresh_library)
            if added.job is None:  # an older engine: ingest it as any folder
                return self._follow(client=client, last=client.ingest(paths=[path]))
            return self._follow(client=client, last=added.job)

        self._submit(
            what="Adding the folder",
            call=follow,
            on_result=self._job_finished,
            on_error=lambda e: self._not_started(what="Adding the folder", error=e),
        )

    def _not_started(self, *, what: str, error: BaseException) -> None:
        emit(self.sig_ingest_not_started)
        emit(self.sig_error, what, describe_error(error=error))

    def _follow(self, *, client: EngineClient, last: IngestProgress) -> IngestProgress:
        """In a worker: report a job's progress until it ends; returns its last state."""

        def show(progress: IngestProgress) -> None:
            self._post(lambda: emit(self.sig_ingest_progress, progress))

        return follow_job(client=client, last=last, closed=self._closed, show=show)

    def _job_finished(self, progress: IngestProgress) -> None:
        emit(self.sig_ingest_finished, progress)
        self.refresh_library()
        self.refresh_status()

    def pause_ingest(self) -> None:
        """Pause all ingestion after the file at hand (watched folders too)."""
        self._submit(
            what="Pausing",
            call=lambda c: c.pause_ingest(),
            on_result=self._queue_state,
        )

    def resume_ingest(self) -> None:
        self._submit(
            what="Resuming",
            call=lambda c: c.resume_ingest(),
            on_result=self._queue_state,
        )

    def _queue_state(self, state: IngestQueueState) -> None:
        emit(self.sig_ingest_paused, state.paused)

    # -- asking (app/asking.py) ---------------------------------------------------------

    def _via(self) -> asking.Via:
        return asking.Via(
            run=self.run,
            client=lambda: self._client,
            closed=self._closed,
            post=self._post,
            error=lambda what, message: emit(self.sig_error, what, message),
            probe=self._probe,
        )

    def ask(self, *, stream: AnswerStream) -> bool:
        """Feed the engine's answer to `stream.question` into `stream` (asking.ask)."""
        return asking.ask(via=self._via(), stream=stream)

    def ask_batch(
        self,
        *,
        questions: Sequence[str],
        k: int = 5,
        on_result: Callable[[BatchResult, int], None],
        on_finished: Callable[[list[BatchResult]], None],
    ) -> BatchRun | None:
        """A list of questions answered together (asking.ask_batch)."""
        return asking.ask_batch(
            via=self._via(), questions=questions, k=k, on_result=on_result, on_finished=on_finished
        )

    def ask_each(
        self,
        *,
        request: EachRequest,
        on_plan: Callable[[EachPlan], None],
        on_row: Callable[[DocumentAnswer], None],
        on_finished: Callable[[EachRun], None],
    ) -> EachRun | None:
        """One question of every document of a scope (asking.ask_each)."""
        return asking.ask_each(
            via=self._via(),
            request=request,
            on_plan=on_plan,
            on_row=on_row,
            on_finished=on_finished,
        )

    # -- quitting -------------------------------------------------------------------

    def close(self, *, shutdown_timeout_s: float = 3.0) -> None:
        """Stop every stream; stop the engine if this window started it.

        Waits at most `shutdown_timeout_s` for the engine to acknowledge: the
        window is already hidden, and quitting must not hang on an engine that
        does not answer."""
        # Every answer's reader sees the door shut and closes its stream.
        self._invoker.close()
        self._health.stop()
        client, self._client = self._client, None
        if client is None:
            return

        def stop_engine() -> None:
            try:
                # An engine this window started stops with it, unless the person
                # keeps it running to watch folders.
                if self._started_engine and not self._keep_running:
                    client.shutdown()
            except Exception:
                log.exception("the engine did not acknowledge the shutdown")
            finally:
                client.close()

        worker = threading.Thread(target=stop_engine, name="ragdoll-gui-quit", daemon=True)
        worker.start()
        worker.join(timeout=shutdown_timeout_s)
