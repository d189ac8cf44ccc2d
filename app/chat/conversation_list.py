"""The list of conversations beside the chat: search box, list, new/rename/delete.

It shows what the chat pane gives it and reports what the person does; the
pane owns the conversations and the store.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QMessageBox,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.chat.conversations import Conversation
from app.qt_compat import emit

ID_ROLE = Qt.ItemDataRole.UserRole + 1
SEARCH_DELAY_MS = 150

Confirm = Callable[[QWidget, str], bool]


def confirm_dialog(parent: QWidget, question: str) -> bool:
    answer = QMessageBox.question(parent, "Delete the conversation", question)
    return answer == QMessageBox.StandardButton.Yes


def when_text(*, stamp: float, now: float | None = None) -> str:
    now = time.time() if now is None else now
    if time.strftime("%Y-%m-%d", time.localtime(stamp)) == time.strftime(
        "%Y-%m-%d", time.localtime(now)
    ):
        return time.strftime("%H:%M", time.localtime(stamp))
    return time.strftime("%d %b %Y", time.localtime(stamp))


class ConversationList(QWidget):
    sig_selected = Signal(str)  # conversation id
    sig_new = Signal()
    sig_renamed = Signal(str, str)  # id, new title
    sig_deleted = Signal(str)
    sig_search = Signal(str)  # the filter, after the person paused typing

    def __init__(self, *, confirm: Confirm = confirm_dialog, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("conversationList")
        self.confirm = confirm
        self._filling = False

        self.search = QLineEdit()
        self.search.setObjectName("conversationSearch")
        self.search.setAccessibleName("Search conversations")
        self.search.setPlaceholderText("Search conversations (Ctrl+F)")
        self.search.setClearButtonEnabled(True)
        self._search_timer = QTimer(self)
        self._search_timer.setSingleShot(True)
        self._search_timer.setInterval(SEARCH_DELAY_MS)
        self._search_timer.timeout.connect(lambda: emit(self.sig_search, self.search.text()))
        self.search.textChanged.connect(lambda _t: self._search_timer.start())

        self.no_match = QLabel("")
        self.no_match.setObjectName("quiet")
        self.no_match.setAccessibleName("Search result")
        self.no_match.setTextFormat(Qt.TextFormat.PlainText)
        self.no_match.setWordWrap(True)
        self.no_match.hide()

        self.list = QListWidget()
        self.list.setObjectName("conversations")
        self.list.setAccessibleName("Conversations")
        self.list.setUniformItemSizes(True)
        # In the middle: two conversations begun alike differ at their end ("… (2)").
        self.list.setTextElideMode(Qt.TextElideMode.ElideMiddle)
        self.list.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.list.setEditTriggers(
            QListWidget.EditTrigger.EditKeyPressed | QListWidget.EditTrigger.DoubleClicked
        )
        self.list.currentItemChanged.connect(self._on_current)
        self.list.itemChanged.connect(self._on_item_changed)

        self.new_button = QPushButton("New chat")
        self.new_button.setAccessibleName("New conversation")
        self.new_button.setToolTip("Start a new conversation (Ctrl+N)")
        self.new_button.clicked.connect(lambda: emit(self.sig_new))
        self.rename_button = QPushButton("Rename")
        self.rename_button.setAccessibleName("Rename the conversation")
        self.rename_button.setToolTip("Rename the selected conversation (F2)")
        self.rename_button.clicked.connect(self.rename_current)
        self.delete_button = QPushButton("Delete")
        self.delete_button.setAccessibleName("Delete the conversation")
        self.delete_button.setToolTip("Delete the selected conversation")
        self.delete_button.clicked.connect(self.delete_current)

        buttons = QHBoxLayout()
        buttons.setSpacing(4)
        buttons.addWidget(self.rename_button)
        buttons.addWidget(self.delete_button)

        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(6)
        layout.addWidget(self.new_button)
        layout.addWidget(self.search)
        layout.addWidget(self.no_match)
        layout.addWidget(self.list, 1)
        layout.addLayout(buttons)
        self._update_buttons()

    # -- what the pane shows -----------------------------------------------------------

    def show_conversations(
        self, conversations: Iterable[Conversation], *, current: str, query: str = ""
    ) -> None:
        """Refill the list (already filtered by `query` and ordered) and select
        `current`; a search that finds nothing says so instead of an empty list."""
        shown = list(conversations)
        self.no_match.setText(
            f"No conversation mentions “{query}” in its questions, answers or sources."
            if query and not shown
            else ""
        )
        self.no_match.setVisible(bool(query) and not shown)
        self._filling = True
        try:
            self.list.clear()
            for c in shown:
                item = QListWidgetItem(c.title)
                item.setData(ID_ROLE, c.id)
                item.setToolTip(f"{c.title}\n{when_text(stamp=c.updated)}")
                item.setFlags(item.flags() | Qt.ItemFlag.ItemIsEditable)
                self.list.addItem(item)
                if c.id == current:
                    self.list.setCurrentItem(item)
        finally:
            self._filling = False
        self._update_buttons()

    def select(self, conversation_id: str) -> None:
        """Mark the conversation shown when the switch did not come from this list
        (the list had kept the old one highlighted beside the new transcript)."""
        self._filling = True
        try:
            for i in range(self.list.count()):
                item = self.list.item(i)
                if item.data(ID_ROLE) == conversation_id:
                    self.list.setCurrentItem(item)
                    break
        finally:
            self._filling = False
        self._update_buttons()

    def ids(self) -> list[str]:
        return [self.list.item(i).data(ID_ROLE) for i in range(self.list.count())]

    def current_id(self) -> str:
        item = self.list.currentItem()
        return str(item.data(ID_ROLE)) if item is not None else ""

    def focus_search(self) -> None:
        self.search.setFocus()
        self.search.selectAll()

    # -- what the person does ------------------------------------------------------------

    def rename_current(self) -> None:
        item = self.list.currentItem()
        if item is not None:
            self.list.editItem(item)

    def delete_current(self) -> None:
        item = self.list.currentItem()
        if item is None:
            return
        if self.confirm(self, f"Delete “{item.text()}”? This cannot be undone."):
            emit(self.sig_deleted, str(item.data(ID_ROLE)))

    def _on_current(self, item: QListWidgetItem | None, _previous: object) -> None:
        self._update_buttons()
        if item is not None and not self._filling:
            emit(self.sig_selected, str(item.data(ID_ROLE)))

    def _on_item_changed(self, item: QListWidgetItem) -> None:
        if self._filling:
            return
        title = " ".join(item.text().split())
        if title:
            emit(self.sig_renamed, str(item.data(ID_ROLE)), title)

    def _update_buttons(self) -> None:
        has = self.list.currentItem() is not None
        self.rename_button.setEnabled(has)
        self.delete_button.setEnabled(has)
