"""The window collects Python's cyclic garbage on its own thread only (app/gui_gc.py):
a collection on a worker thread that frees a QObject can deadlock with Qt (issue #41)."""

from __future__ import annotations

import gc
import subprocess
import sys
import threading
import weakref

from pytestqt.qtbot import QtBot

from app.gui_gc import collect_on_gui_thread


def test_the_gui_start_turns_automatic_collection_off_and_installs_one_collector() -> None:
    # A process of its own: this one's qapp fixture has done the same already.
    script = (
        "import gc\n"
        "from PySide6.QtWidgets import QApplication\n"
        "from app.main import configure_app\n"
        "from app.gui_gc import GuiGarbageCollector, collect_on_gui_thread\n"
        "assert gc.isenabled()\n"
        "app = QApplication([])\n"
        "configure_app(app)\n"
        "found = app.findChildren(GuiGarbageCollector)\n"
        "print(gc.isenabled(), len(found), collect_on_gui_thread(app) is found[0])\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "1", "True"]


class _Node:
    pass


def test_a_worker_thread_never_collects_and_the_gui_timer_does(qtbot: QtBot, qapp) -> None:  # type: ignore[no-untyped-def]
    collector = collect_on_gui_thread(qapp)
    assert not gc.isenabled()
    collected_on: list[int] = []

    def seen(phase: str, _info: dict[str, int]) -> None:
        if phase == "start":
            collected_on.append(threading.get_ident())

    gc.callbacks.append(seen)
    try:
        # Far past every threshold: with automatic collection on, this worker would
        # run hundreds of collections itself (as the conversation loader did).
        def make_cycles() -> None:
            for _ in range(100_000):
                cycle: list[object] = []
                cycle.append(cycle)

        worker = threading.Thread(target=make_cycles, name="ragdoll-test-cycles")
        worker.start()
        worker.join()
        assert collected_on == []

        node = _Node()
        node.me = node  # type: ignore[attr-defined]
        dead = weakref.ref(node)
        del node
        before = collector.collections
        qtbot.waitUntil(lambda: dead() is None, timeout=10_000)  # the timer's tick
    finally:
        gc.callbacks.remove(seen)
    assert collector.collections > before
    assert set(collected_on) == {threading.get_ident()}  # the GUI thread's


def test_a_library_that_turns_collection_back_on_is_overruled(qapp) -> None:  # type: ignore[no-untyped-def]
    collector = collect_on_gui_thread(qapp)
    gc.enable()
    try:
        collector.collect_due()
        assert not gc.isenabled()
    finally:
        gc.disable()


def test_a_cycle_that_reached_the_oldest_generation_is_collected_in_the_end(qapp) -> None:  # type: ignore[no-untyped-def]
    """The full collections, which Python runs only once enough objects have grown old,
    still come: garbage that lived long enough to reach the oldest generation goes."""
    collector = collect_on_gui_thread(qapp)
    node = _Node()
    node.me = node  # type: ignore[attr-defined]
    dead = weakref.ref(node)
    kept: list[list[object]] = []

    def tick() -> None:  # as many allocations as the timer would see in a busy second
        kept.extend([] for _ in range(1000))
        collector.collect_due()

    for _ in range(30):  # through the young generations, alive: it grows old
        tick()
    del node
    for _ in range(5000):  # what the process keeps grows until a full collection is due
        tick()
        if dead() is None:
            break
    assert dead() is None
