"""Emitting Qt signals from Python without PySide6 6.12.0's refcount bug.

`SignalInstance.emit()` in PySide6 6.12.0 returns `True` without taking a
reference to it. On Python 3.11, where `True` is an ordinary refcounted object,
every emit from Python code takes one reference away from `True`; after a few
thousand (one streamed answer, one ingestion) the interpreter aborts with
"Fatal Python error: bool_dealloc". Python 3.12 made `True` immortal, which
hides the bug there. Signals that Qt emits from C++ (clicked, timeout, ...) are
not affected: only `.emit()` called from Python.

So every signal the GUI emits goes through `emit()`, which gives back the
missing reference when — and only when — a probe shows that this PySide6 drops it.
"""

from __future__ import annotations

import ctypes
import functools
import sys
from typing import Any

from PySide6.QtCore import QObject, Signal, SignalInstance


class _Probe(QObject):
    sig_probe = Signal()


@functools.cache
def emit_drops_a_reference() -> bool:
    """True when `SignalInstance.emit()` returns a bool it does not own."""
    probe = _Probe()
    rounds = 32
    before = sys.getrefcount(True)
    for _ in range(rounds):
        probe.sig_probe.emit()
    lost = before - sys.getrefcount(True)
    if lost > 0:
        _give_back(True, times=lost)
    # Another thread touching `True` meanwhile moves the count by a few; a
    # leak moves it by one per emit.
    return lost >= rounds // 2


# Far more references than a process can drop: with them, None is never freed.
_NONE_PIN = 1 << 40


@functools.cache
def keep_none_alive() -> bool:
    """Pin `None` when PySide6 drops a reference to it on every void call.

    PySide6 6.12.0 on Python 3.11 returns `None` from every C++ method that
    returns void (`label.setText(...)`, `item.setData(...)`) without taking a
    reference to it; None starts with a few thousand, so a few thousand calls
    later the interpreter aborts with "Fatal Python error: none_dealloc".
    Python 3.12 made None immortal; here the probe finds the leak and adds
    references enough to make None as good as immortal. True when pinned."""
    probe = _Probe()
    rounds = 32
    before = sys.getrefcount(None)
    for _ in range(rounds):
        probe.setObjectName("probe")
    if before - sys.getrefcount(None) < rounds // 2:
        return False
    # ob_refcnt is the first field of every CPython object.
    ctypes.c_ssize_t.from_address(id(None)).value += _NONE_PIN
    return True


def emit(signal: SignalInstance, *args: Any) -> None:
    """`signal.emit(*args)`, safe on every PySide6 version."""
    result = signal.emit(*args)
    if isinstance(result, bool) and emit_drops_a_reference():
        _give_back(result, times=1)


def _give_back(value: bool, *, times: int) -> None:
    incref = ctypes.pythonapi.Py_IncRef
    incref.argtypes = [ctypes.py_object]
    incref.restype = None
    for _ in range(times):
        incref(value)
