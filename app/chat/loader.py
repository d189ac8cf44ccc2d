"""Reading the conversations off the GUI thread."""

from __future__ import annotations

import logging
import threading

from PySide6.QtCore import QObject, Signal

from app.chat.conversations import ConversationStore
from app.door import Door
from app.qt_compat import emit

log = logging.getLogger(__name__)


class ConversationLoader(QObject):
    """Reads the conversations in a worker and hands them to the GUI thread."""

    sig_loaded = Signal(object)  # list[tuple[Conversation, str]]: each with its search text

    def __init__(self, *, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._door = Door()
        self.destroyed.connect(self._door.close)

    def start(self, *, store: ConversationStore) -> None:
        def work() -> None:
            try:
                # The search texts too: case-folding megabytes is work for a worker.
                found = [(c, c.search_text()) for c in store.load_all()]
            except Exception:
                log.exception("could not read the conversations in %s", store.folder)
                found = []
            self._door.call(lambda: emit(self.sig_loaded, found))

        threading.Thread(target=work, name="ragdoll-gui-conversations", daemon=True).start()
