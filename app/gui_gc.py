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
        # Python's own bookkeeping for full collections (Modules/gcmodule.c): objects
        # that survived the last one, and those that reached the oldest generation since.
        self._long_lived = len(gc.get_objects(generation=2))
        self._pending = 0
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
        self.collections += 1
        if g1 <= t1:
            return gc.collect(0)
        # As Python does, a full collection only once the objects that reached the
        # oldest generation since the last one are a quarter of those that survived
        # it: it walks every object (half a second in a test process that loaded
        # torch), where the young generations are a few thousand.
        if g2 > t2 and self._pending > self._long_lived // 4:
            found = gc.collect(2)
            self._long_lived = len(gc.get_objects(generation=2))
            self._pending = 0
            return found
        young = len(gc.get_objects(generation=0)) + len(gc.get_objects(generation=1))
        found = gc.collect(1)
        self._pending += max(0, young - found)  # the survivors moved to the oldest
        return found


def collect_on_gui_thread(app: QCoreApplication) -> GuiGarbageCollector:
    """Turn automatic collection off for this process and collect on `app`'s thread from
    a timer. Call on the GUI thread once the application exists; calling again returns
    the collector already installed."""
    found = app.findChild(QObject, _NAME)
    if isinstance(found, GuiGarbageCollector):
        return found
    return GuiGarbageCollector(parent=app)
