"""The chat pane on its own: conversations, streaming, tooltips, regenerate, copy, keys."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

from PySide6.QtCore import QEvent, QPoint, Qt
from PySide6.QtGui import QGuiApplication, QHelpEvent, QTextCursor
from PySide6.QtWidgets import QApplication, QToolTip
from pytestqt.qtbot import QtBot

from app.chat.answer_render import chunk_id_from_href
from app.chat.answer_stream import AnswerStream
from app.chat.chat_pane import ChatPane
from app.chat.conversations import ConversationStore
from engine.wire import (
    AnswerDone,
    AnswerEvent,
    CitationsEvent,
    DoneEvent,
    Priority,
    SearchedEvent,
    TokenEvent,
    Turn,
)
from tests.app.conftest import MakeWindow
from tests.app.fake_client import ANSWER_TOKENS, CITATIONS, FakeClient


def make_pane(qtbot: QtBot, folder: Path) -> ChatPane:
    pane = ChatPane(store=ConversationStore(folder=folder))
    qtbot.addWidget(pane)
    pane.resize(900, 600)
    pane.show()
    qtbot.waitUntil(lambda: pane.loaded, timeout=5000)
    pane.set_ready(True)
    return pane


def feed(stream: AnswerStream, *, text: str = "") -> None:
    """What the bridge does with the engine's events for one question."""
    stream.deliver(CitationsEvent(citations=CITATIONS))
    for token in [text] if text else ANSWER_TOKENS:
        stream.deliver(TokenEvent(text=token))
    stream.deliver(DoneEvent(done=AnswerDone(answer="", note="", mode="extractive")))


def answer(pane: ChatPane, *, question: str, text: str = "") -> None:
    feed(pane.ask(question=question), text=text)


def anchor_point(pane: ChatPane, *, chunk_id: str) -> QPoint:
    doc = pane.transcript.document()
    block = doc.begin()
    while block.isValid():
        it = block.begin()
        while not it.atEnd():
            frag = it.fragment()
            if chunk_id_from_href(href=frag.charFormat().anchorHref()) == chunk_id:
                cursor = QTextCursor(doc)
                cursor.setPosition(frag.position() + 1)
                return pane.transcript.cursorRect(cursor).center() + QPoint(-2, 0)
            it += 1
        block = block.next()
    raise AssertionError(f"no link to {chunk_id}")


def test_conversations_are_kept_switched_renamed_deleted_and_reloaded(
    qtbot: QtBot, tmp_path: Path
) -> None:
    pane = make_pane(qtbot, tmp_path)
    answer(pane, question="What do tomatoes need?")
    answer(pane, question="And peppers?")
    first = pane.current.id
    qtbot.keyClick(pane.question, Qt.Key.Key_N, Qt.KeyboardModifier.ControlModifier)
    assert pane.current.id != first and pane.transcript.toPlainText() == ""
    answer(pane, question="Where is the budget?", text="In **the plan**.")
    second = pane.current.id
    assert pane.conversation_list.ids() == [second, first]  # newest first

    pane.conversation_list.list.setCurrentRow(1)
    assert pane.current.id == first
    assert "And peppers?" in pane.transcript.toPlainText()
    assert pane.sources_model.rowCount() == 2
    pane.rename(first, "Vegetables")
    pane.delete(second)
    assert pane.conversation_list.ids() == [first]

    again = make_pane(qtbot, tmp_path)
    (kept,) = again.conversations
    assert kept.title == "Vegetables"
    assert [e.question for e in kept.exchanges] == ["What do tomatoes need?", "And peppers?"]
    assert kept.exchanges[0].answer == "".join(ANSWER_TOKENS)
    assert kept.exchanges[0].citations == tuple(CITATIONS)


def test_the_search_box_filters_by_title_and_message_text(qtbot: QtBot, tmp_path: Path) -> None:
    pane = make_pane(qtbot, tmp_path)
    answer(pane, question="tomatoes", text="They need sun.")
    tomatoes = pane.current.id
    pane.new_chat()
    answer(pane, question="budget", text="The plan has a total.")
    qtbot.keyClick(pane, Qt.Key.Key_F, Qt.KeyboardModifier.ControlModifier)
    assert pane.conversation_list.search.hasFocus()
    # Both cite the same passages; only one answer says "they".
    qtbot.keyClicks(pane.conversation_list.search, "THEY need")
    qtbot.waitUntil(lambda: pane.conversation_list.ids() == [tomatoes], timeout=2000)
    pane.conversation_list.search.clear()
    qtbot.waitUntil(lambda: len(pane.conversation_list.ids()) == 2, timeout=2000)


def test_ctrl_f_searches_the_sources_and_says_when_nothing_matches(
    qtbot: QtBot, tmp_path: Path
) -> None:
    pane = make_pane(qtbot, tmp_path)
    answer(pane, question="tomatoes", text="They need sun [2].")
    tomatoes = pane.current.id
    pane.new_chat()
    stream = pane.ask(question="budget")  # no sources
    stream.deliver(CitationsEvent(citations=[]))
    stream.deliver(
        DoneEvent(done=AnswerDone(answer="The plan has a total.", note="", mode="extractive"))
    )
    search = pane.conversation_list.search
    qtbot.keyClick(pane, Qt.Key.Key_F, Qt.KeyboardModifier.ControlModifier)
    # "May" is only in a cited passage (notes.md), not in a question or an answer.
    qtbot.keyClicks(search, "before May")
    qtbot.waitUntil(lambda: pane.conversation_list.ids() == [tomatoes], timeout=2000)
    assert not pane.conversation_list.no_match.isVisible()
    search.clear()
    qtbot.keyClicks(search, "notes.md")  # a cited file's name finds it too
    qtbot.waitUntil(lambda: tomatoes in pane.conversation_list.ids(), timeout=2000)
    search.clear()
    qtbot.keyClicks(search, "zeppelin")
    qtbot.waitUntil(lambda: pane.conversation_list.no_match.isVisible(), timeout=2000)
    assert pane.conversation_list.ids() == []
    assert "No conversation mentions “zeppelin”" in pane.conversation_list.no_match.text()
    # Escape ends the search, as in a browser's find bar: every conversation is back.
    pane.window().activateWindow()
    search.setFocus()
    qtbot.waitUntil(search.hasFocus, timeout=2000)
    qtbot.keyClick(search, Qt.Key.Key_Escape)
    assert search.text() == ""
    qtbot.waitUntil(lambda: not pane.conversation_list.no_match.isVisible(), timeout=2000)
    assert len(pane.conversation_list.ids()) == 2


def test_the_no_model_note_appears_once_per_conversation(qtbot: QtBot, tmp_path: Path) -> None:
    pane = make_pane(qtbot, tmp_path)
    note = "No language model is installed, so answers are quoted from your documents."
    for question in ("tomatoes?", "peppers?", "beans?"):
        stream = pane.ask(question=question)
        stream.deliver(CitationsEvent(citations=CITATIONS))
        stream.deliver(TokenEvent(text="Quoted [1]."))
        stream.deliver(DoneEvent(done=AnswerDone(answer="", note=note, mode="extractive")))
    assert pane.transcript.toPlainText().count("No language model is installed") == 1
    # Shown again from the files: still once; a new conversation shows it again.
    pane._show_current()
    qtbot.waitUntil(lambda: pane._filled(), timeout=2000)
    assert pane.transcript.toPlainText().count("No language model is installed") == 1
    pane.new_chat()
    stream = pane.ask(question="onions?")
    stream.deliver(DoneEvent(done=AnswerDone(answer="Quoted.", note=note, mode="extractive")))
    assert pane.transcript.toPlainText().count("No language model is installed") == 1


def test_a_marker_shows_its_snippet_on_hover(qtbot: QtBot, tmp_path: Path) -> None:
    pane = make_pane(qtbot, tmp_path)
    answer(pane, question="q")
    assert "six hours of sun" in pane.marker_tooltip(chunk_id=CITATIONS[0].chunk_id)
    point = anchor_point(pane, chunk_id=CITATIONS[1].chunk_id)
    viewport = pane.transcript.viewport()
    event = QHelpEvent(QEvent.Type.ToolTip, point, viewport.mapToGlobal(point))
    QApplication.sendEvent(viewport, event)
    assert "warm soil" in QToolTip.text()
    assert "notes.md" in QToolTip.text()


def test_regenerate_asks_the_last_question_again_in_place(qtbot: QtBot, tmp_path: Path) -> None:
    pane = make_pane(qtbot, tmp_path)
    answer(pane, question="first")
    answer(pane, question="second")
    asked: list[AnswerStream] = []
    pane.sig_ask.connect(asked.append)
    assert pane.regenerate_button.isEnabled()
    pane.regenerate_button.click()
    assert [a.question for a in asked] == ["second"]
    assert [e.question for e in pane.current.exchanges] == ["first", "second"]
    assert pane.current.exchanges[-1].answer == ""  # the old answer went
    feed(asked[0], text="better")
    assert [e.answer for e in pane.current.exchanges][-1] == "better"
    assert len(pane.current.exchanges) == 2


def test_copy_puts_the_answer_and_its_sources_on_the_clipboard(
    qtbot: QtBot, tmp_path: Path
) -> None:
    pane = make_pane(qtbot, tmp_path)
    assert not pane.copy_button.isEnabled()
    answer(pane, question="q")
    qtbot.keyClick(
        pane.question,
        Qt.Key.Key_C,
        Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier,
    )
    text = QGuiApplication.clipboard().text()
    assert text.startswith("".join(ANSWER_TOKENS))
    assert "Sources:" in text and "[2] notes.md" in text


def test_ctrl_enter_sends_and_a_stream_can_go_on_in_another_conversation(
    qtbot: QtBot, tmp_path: Path
) -> None:
    pane = make_pane(qtbot, tmp_path)
    asked: list[AnswerStream] = []
    pane.sig_ask.connect(asked.append)
    qtbot.keyClicks(pane.question, "hello")
    qtbot.keyClick(pane.question, Qt.Key.Key_Return, Qt.KeyboardModifier.ControlModifier)
    (stream,) = asked
    assert stream.question == "hello" and pane.streaming

    streaming_into = pane.current.id
    stream.deliver(CitationsEvent(citations=CITATIONS))
    stream.deliver(TokenEvent(text="Half "))
    pane.new_chat()  # the person moves on while the answer streams
    stream.deliver(TokenEvent(text="and the rest."))
    stream.deliver(DoneEvent(done=AnswerDone(answer="", note="done", mode="extractive")))
    assert pane.transcript.toPlainText() == ""
    pane.switch_to(streaming_into)
    assert "Half and the rest." in pane.transcript.toPlainText()
    assert "done" in pane.transcript.toPlainText()


def test_controls_have_accessible_names(qtbot: QtBot, tmp_path: Path) -> None:
    pane = make_pane(qtbot, tmp_path)
    for widget in (
        pane.question,
        pane.ask_button,
        pane.stop_button,
        pane.regenerate_button,
        pane.copy_button,
        pane.sources,
        pane.transcript,
        pane.conversation_list.search,
        pane.conversation_list.list,
        pane.conversation_list.new_button,
        pane.conversation_list.rename_button,
        pane.conversation_list.delete_button,
    ):
        assert widget.accessibleName(), widget


def test_in_the_window_regenerate_streams_a_new_answer_and_keeps_one_exchange(
    qtbot: QtBot, make_window: MakeWindow
) -> None:
    client = FakeClient()
    window = make_window(client)
    qtbot.keyClicks(window.chat.question, "What do tomatoes need?")
    qtbot.keyClick(window.chat.question, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: not window.chat.streaming, timeout=5000)
    window.chat.regenerate_button.click()
    qtbot.waitUntil(lambda: len(client.called("ask_stream")) == 2, timeout=5000)
    qtbot.waitUntil(lambda: not window.chat.streaming, timeout=5000)
    (only,) = window.chat.current.exchanges
    assert only.answer == "".join(ANSWER_TOKENS)
    assert window.chat.transcript.toPlainText().count("What do tomatoes need?") == 1


def test_the_last_conversation_is_reopened_after_a_restart(
    qtbot: QtBot, make_window: MakeWindow
) -> None:
    window = make_window(FakeClient())
    qtbot.waitUntil(lambda: window.chat.loaded, timeout=5000)
    answer(window.chat, question="What do tomatoes need?")
    first = window.chat.current.id
    window.chat.new_chat()
    answer(window.chat, question="And peppers?")
    window.chat.switch_to(first)  # the person went back to the first one
    window.close()

    again = make_window(FakeClient())
    qtbot.waitUntil(lambda: again.chat.current.id == first, timeout=5000)
    assert "tomatoes" in again.chat.transcript.toPlainText()
    assert again.chat.conversation_list.current_id() == first


def test_a_conversation_that_cannot_be_saved_is_said_in_the_window(
    qtbot: QtBot, make_window: MakeWindow, tmp_path: Path
) -> None:
    window = make_window(FakeClient())
    qtbot.waitUntil(lambda: window.chat.loaded, timeout=5000)
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the conversations folder should be")
    window.chat.store.folder = blocker
    answer(window.chat, question="What do tomatoes need?")
    assert window.banner.isVisible()
    assert "Could not save the conversation" in window.banner.label.text()


def test_a_follow_up_goes_with_the_conversation_shown_and_says_how_it_was_searched(
    qtbot: QtBot, make_window: MakeWindow
) -> None:
    client = FakeClient()
    window = make_window(client)
    chat = window.chat
    for question in ("What do tomatoes need?", "And how much of it?"):
        qtbot.keyClicks(chat.question, question)
        qtbot.keyClick(chat.question, Qt.Key.Key_Return)
        qtbot.waitUntil(lambda: not chat.streaming, timeout=5000)
    first, second = client.called("ask_stream")
    assert first["history"] == []
    (turn,) = second["history"]
    assert turn.question == "What do tomatoes need?"
    assert turn.answer == "".join(ANSWER_TOKENS) and turn.citations == list(CITATIONS)
    assert chat.searched_label.isVisible()
    assert chat.searched_label.text() == (
        "searched for: And how much of it?  (with: What do tomatoes need?)"
    )
    assert chat.current.exchanges[-1].searched.startswith("And how much of it?")
    chat.new_chat()  # a new conversation: nothing searched yet, and no history
    assert not chat.searched_label.isVisible()


class _HedgingClient(FakeClient):
    """The engine's stream for a question its detector judges standalone whose results
    the earlier turn changed: the "searched for" event comes after the search
    (`hedged`), right before the citations (engine/rag/pipeline/answer_stream.py)."""

    def ask_stream(
        self,
        *,
        question: str,
        k: int = 5,
        priority: Priority = "interactive",
        history: Sequence[Turn] = (),
        cancel: object = None,
    ) -> Iterator[AnswerEvent]:
        self._call("ask_stream", question=question, k=k, history=list(history))
        if history:
            yield SearchedEvent(query=question, context=history[-1].question, hedged=True)
        yield CitationsEvent(citations=list(CITATIONS))
        yield TokenEvent(text="Full sun.")
        yield DoneEvent(done=AnswerDone(answer="Full sun.", mode="extractive"))


def test_a_question_the_history_changed_the_results_of_says_how_it_was_searched(
    qtbot: QtBot, make_window: MakeWindow
) -> None:
    chat = make_window(_HedgingClient()).chat
    for question in ("How do I change the locale on Debian?", "Why UTF-8?"):
        qtbot.keyClicks(chat.question, question)
        qtbot.keyClick(chat.question, Qt.Key.Key_Return)
        qtbot.waitUntil(lambda: not chat.streaming, timeout=5000)
    assert chat.searched_label.isVisible()
    assert chat.searched_label.text() == (
        "searched for: Why UTF-8?  (with: How do I change the locale on Debian?)"
    )
    assert chat.current.exchanges[-1].searched == (
        "Why UTF-8?  (with: How do I change the locale on Debian?)"
    )


def test_a_switch_not_made_in_the_list_moves_its_highlight(qtbot: QtBot, tmp_path: Path) -> None:
    """The list highlighted one conversation beside another's transcript after a
    switch made elsewhere (the README's dark screenshot showed it)."""
    pane = make_pane(qtbot, tmp_path)
    answer(pane, question="tomatoes")
    first = pane.current.id
    pane.new_chat()
    answer(pane, question="peppers")
    assert pane.conversation_list.current_id() == pane.current.id != first
    pane.switch_to(first)
    assert pane.conversation_list.current_id() == first
    assert "tomatoes" in pane.transcript.toPlainText()


def test_once_the_sources_are_shown_the_search_is_not_said_to_go_on(
    qtbot: QtBot, tmp_path: Path
) -> None:
    """Issue #44, 8: "Searching your documents…" stayed up beside the sources while
    the model read them, until its first word."""
    pane = make_pane(qtbot, tmp_path)
    stream = pane.ask(question="What do tomatoes need?")
    assert "Searching your documents…" in pane.transcript.toPlainText()
    stream.deliver(CitationsEvent(citations=CITATIONS))
    qtbot.waitUntil(lambda: pane.sources_model.rowCount() == 2, timeout=5000)
    qtbot.waitUntil(lambda: "Writing the answer from 2 passages…" in pane.transcript.toPlainText())
    assert "Searching" not in pane.transcript.toPlainText()
    stream.deliver(TokenEvent(text="Tomatoes need sun."))
    qtbot.waitUntil(lambda: "Tomatoes need sun." in pane.transcript.toPlainText())
    assert "Writing the answer" not in pane.transcript.toPlainText()


def test_two_conversations_begun_with_the_same_question_have_different_titles(
    qtbot: QtBot, tmp_path: Path
) -> None:
    """Issue #44, 8: the list showed two conversations under one title."""
    pane = make_pane(qtbot, tmp_path)
    for _ in range(3):
        pane.new_chat()
        answer(pane, question="How do I change the locale on Debian?")
    titles = sorted(c.title for c in pane.conversations)
    assert titles == [
        "How do I change the locale on Debian?",
        "How do I change the locale on Debian? (2)",
        "How do I change the locale on Debian? (3)",
    ]
    # Told apart in the list too, where a title is cut to its width.
    shown = pane.conversation_list.list
    width = shown.viewport().width() - 12
    cut = {shown.fontMetrics().elidedText(t, shown.textElideMode(), width) for t in titles}
    assert len(cut) == 3, cut
