"""How the chat pane's widgets are arranged: the conversations beside the chat, the
transcript above the sources, the question row below (app/chat/chat_pane.py makes the
widgets and owns what they do)."""

from __future__ import annotations

from typing import Protocol

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QHBoxLayout, QSplitter, QVBoxLayout, QWidget


class ChatWidgets(Protocol):
    """The widgets the chat pane makes, as this arrangement places them."""

    @property
    def conversation_list(self) -> QWidget: ...
    @property
    def transcript(self) -> QWidget: ...
    @property
    def sources_label(self) -> QWidget: ...
    @property
    def regenerate_button(self) -> QWidget: ...
    @property
    def copy_button(self) -> QWidget: ...
    @property
    def searched_label(self) -> QWidget: ...
    @property
    def sources(self) -> QWidget: ...
    @property
    def question(self) -> QWidget: ...
    @property
    def ask_button(self) -> QWidget: ...
    @property
    def stop_button(self) -> QWidget: ...


def lay_out(*, pane: QWidget, widgets: ChatWidgets) -> tuple[QSplitter, QSplitter]:
    """Arrange `widgets` in `pane`; returns (transcript/sources split, conversations
    split)."""
    sources_box = QWidget()
    sources_layout = QVBoxLayout(sources_box)
    sources_layout.setContentsMargins(0, 6, 0, 0)
    sources_layout.setSpacing(4)
    sources_head = QHBoxLayout()
    sources_head.addWidget(widgets.sources_label, 1)
    sources_head.addWidget(widgets.regenerate_button)
    sources_head.addWidget(widgets.copy_button)
    sources_layout.addLayout(sources_head)
    sources_layout.addWidget(widgets.searched_label)
    sources_layout.addWidget(widgets.sources)

    split = QSplitter(Qt.Orientation.Vertical)
    split.setObjectName("chatSplitter")
    split.setChildrenCollapsible(False)
    split.addWidget(widgets.transcript)
    split.addWidget(sources_box)
    split.setStretchFactor(0, 3)
    split.setStretchFactor(1, 1)
    split.setSizes([430, 290])

    ask_row = QHBoxLayout()
    ask_row.setSpacing(6)
    ask_row.addWidget(widgets.question, 1)
    ask_row.addWidget(widgets.ask_button)
    ask_row.addWidget(widgets.stop_button)

    chat = QWidget()
    chat_layout = QVBoxLayout(chat)
    chat_layout.setContentsMargins(0, 0, 0, 0)
    chat_layout.setSpacing(8)
    chat_layout.addWidget(split, 1)
    chat_layout.addLayout(ask_row)

    outer_split = QSplitter(Qt.Orientation.Horizontal)
    outer_split.setObjectName("conversationSplitter")
    outer_split.setChildrenCollapsible(False)
    outer_split.addWidget(widgets.conversation_list)
    outer_split.addWidget(chat)
    outer_split.setStretchFactor(0, 0)
    outer_split.setStretchFactor(1, 1)
    outer_split.setSizes([200, 600])

    layout = QVBoxLayout(pane)
    layout.setContentsMargins(0, 0, 0, 0)
    layout.addWidget(outer_split)
    return split, outer_split
