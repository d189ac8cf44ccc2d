from __future__ import annotations

import sys

from PySide6.QtCore import QObject, Signal

from app.qt_compat import emit, keep_none_alive


class _Emitter(QObject):
    sig_value = Signal(object)


def test_emitting_many_signals_keeps_true_alive() -> None:
    # PySide6 6.12.0 on Python 3.11 loses one reference to True per emit; a
    # streamed answer emits thousands, and the interpreter then aborts.
    emitter = _Emitter()
    seen: list[object] = []
    emitter.sig_value.connect(seen.append)
    before = sys.getrefcount(True)
    for i in range(5000):
        emit(emitter.sig_value, i)
    assert len(seen) == 5000
    assert sys.getrefcount(True) >= before - 50


def test_none_survives_many_void_qt_calls() -> None:
    keep_none_alive()
    obj = QObject()
    before = sys.getrefcount(None)
    for _ in range(20_000):  # more than None's own references on Python 3.11
        obj.setObjectName("x")
    # Pinned or immortal: None is still there to return (no none_dealloc abort).
    assert sys.getrefcount(None) > 0
    assert before > 20_000 or sys.version_info >= (3, 12)
