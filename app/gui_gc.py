"""Python's cyclic garbage collector, run on the GUI thread only.

Automatic collection runs on whichever thread happens to allocate past the threshold.
In the window that is often a worker (`app/chat/loader.py` reading conversations,
`app/answer_reader.py`, an `EngineOp`), and a collection there frees whatever garbage
the whole process holds, QObjects included: `QObject::~QObject` takes Qt's signal-slot
mutex and then asks for the GIL (PySide looks up Python overrides), while the GUI
thread, holding the GIL, waits for that mutex in `QObject::connect`. Both wait forever.
Seen in the test suite under load (issue #41): a worker building a conversation list
collected a QObject while `MainWindow.__init__` wired its menus.

So the window turns automatic collection off and collects from a timer on the GUI
thread, by the same generation thresholds Python would use (pyqtgraph's
`GarbageCollector`, Erik Janssens' pattern). Reference counting still frees
everything that is not in a cycle at once; what is in a cycle waits at most one tick.
"""

from __future__ import annotations

import gc
import logging

from PySide6.QtCore import QCoreApplication, QObject, QTimer

log = logging.getLogger(__name__)

_NAME = "ragdoll-gui-gc"
INTERVAL_MS = 1000


class GuiGarbageCollector(QObject):
    """Owns the timer that collects; its parent is the application, so it lives as long."""

    def __init__(self, *, parent: QObject, interval_ms: int = INTERVAL_MS) -> None:
        super().__init__(parent)
        self.setObjectName(_NAME)
        self._threshold = gc.get_threshold()
        self.collections = 0  # collections this collector ran (any generation)
        gc.disable()
        self._timer = QTimer(self)
        self._timer.timeout.connect(self.collect_due)
        self._timer.start(interval_ms)

    def collect_due(self) -> int:
        """Collect the generations whose counts passed Python's own thresholds, as the
        automatic collector would have; returns how many objects were unreachable."""
        if gc.isenabled():
            # A library switched it back on: collections could run on any thread again.
            log.warning("automatic garbage collection was enabled again; disabling it")
            gc.disable()
        g0, g1, g2 = gc.get_count()
        t0, t1, t2 = self._threshold
        if g0 <= t0:
            return 0
        generation = 0
        if g1 > t1:
            generation = 2 if g2 > t2 else 1
        self.collections += 1
        return gc.collect(generation)


def collect_on_gui_thread(app: QCoreApplication) -> GuiGarbageCollector:
    """Turn automatic collection off for this process and collect on `app`'s thread from
    a timer. Call on the GUI thread once the application exists; calling again returns
    the collector already installed."""
    found = app.findChild(QObject, _NAME)
    if isinstance(found, GuiGarbageCollector):
        return found
    return GuiGarbageCollector(parent=app)
