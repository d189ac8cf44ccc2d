"""Answers as Markdown with clickable markers (pure functions, then the document)."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtGui import QTextCursor, QTextDocument
from pytestqt.qtbot import QtBot

from app.chat.answer_render import answer_markdown, chunk_id_from_href, copy_text, quoted_html
from app.chat.transcript import markdown_fragment, transcript_css
from tests.app.fake_client import CITATIONS

ANSWER = """Tomatoes need sun [1] and warm soil [1, 2].

- water early [2]
- prune weekly

| month | task |
|-------|------|
| May   | plant [1] |

```python
x = items[1]
```
An invented marker [7] stays text, and `code [2]` stays code.
"""


def _anchors(doc: QTextDocument) -> list[str]:
    out = []
    block = doc.begin()
    while block.isValid():
        it = block.begin()
        while not it.atEnd():
            fmt = it.fragment().charFormat()
            if fmt.isAnchor():
                out.append(fmt.anchorHref())
            it += 1
        block = block.next()
    return out


def test_markers_become_links_outside_code_only() -> None:
    md = answer_markdown(text=ANSWER, citations=CITATIONS)
    assert "x = items[1]" in md  # inside the fence, untouched
    assert "`code [2]`" in md
    assert "\\[7\\]" in md  # no such citation: escaped text, no link
    assert md.count("(<cite:") == 5


def test_a_half_streamed_marker_is_plain_text_until_it_closes() -> None:
    assert "cite:" not in answer_markdown(text="sun [1", citations=CITATIONS)
    assert "cite:" in answer_markdown(text="sun [1]", citations=CITATIONS)


def test_the_rendered_answer_has_a_list_a_table_code_and_working_links(qtbot: QtBot) -> None:
    doc = QTextDocument()
    QTextCursor(doc).insertFragment(markdown_fragment(text=ANSWER, citations=CITATIONS, dark=False))
    text = doc.toPlainText()
    assert "Tomatoes need sun [1] and warm soil [1, 2]." in text
    assert "x = items[1]" in text and "[7]" in text
    hrefs = [chunk_id_from_href(href=h) for h in _anchors(doc)]
    assert hrefs == ["doc-a/p2#0", "doc-a/p2#0", "doc-b#3", "doc-b#3", "doc-a/p2#0"]
    block = doc.begin()
    kinds = set()
    while block.isValid():
        if block.textList() is not None:
            kinds.add("list")
        if block.blockFormat().background().color().name() == "#f3f4f6":
            kinds.add("code")
        block = block.next()
    frame_tables = [
        f for f in doc.rootFrame().childFrames() if f.__class__.__name__ == "QTextTable"
    ]
    assert kinds == {"list", "code"}
    assert len(frame_tables) == 1


def test_html_in_an_answer_shows_as_text_never_as_markup(qtbot: QtBot) -> None:
    doc = QTextDocument()
    QTextCursor(doc).insertFragment(
        markdown_fragment(text="<b>bold</b> <img src='x'>", citations=[], dark=False)
    )
    assert "<b>bold</b>" in doc.toPlainText()


def test_copy_text_lists_the_sources_under_the_answer() -> None:
    text = copy_text(answer="Sun [1].\n", citations=list(reversed(CITATIONS)))
    lines = text.splitlines()
    assert lines[0] == "Sun [1]."
    assert lines[2] == "Sources:"
    assert lines[3] == "[1] garden guide.pdf — page 2 (/docs/garden guide.pdf)"
    assert "Tomatoes need at least six hours" in lines[4]
    assert lines[5].startswith("[2] notes.md")


QUOTED = (
    "make || exit 125 # this skips broken builds [1].\n\n"
    "“$ cat ~/test.sh ~ and gnuplot*gray*scale __init__ stay as written. "
    "make || exit 125 # this skips broken builds. Then run it.” [1]"
)


def test_a_quoted_answer_is_literal_text_with_its_sentence_highlighted(qtbot: QtBot) -> None:
    html_text = quoted_html(text=QUOTED, citations=CITATIONS)
    assert html_text.count('class="key"') == 1
    doc = QTextDocument()
    doc.setDefaultStyleSheet(transcript_css(dark=False))
    QTextCursor(doc).insertHtml(html_text)
    text = doc.toPlainText()
    # Markdown would strike "~/test.sh ~" through and eat the asterisks and underscores.
    assert "~/test.sh ~" in text
    assert "gnuplot*gray*scale __init__" in text
    assert "# this skips broken builds [1]." in text
    styles = {}
    block = doc.begin()
    while block.isValid():
        it = block.begin()
        while not it.atEnd():
            frag = it.fragment()
            fmt = frag.charFormat()
            assert not fmt.fontStrikeOut() and not fmt.fontItalic(), frag.text()
            styles[frag.text()] = fmt.background().color().name()
            it += 1
        block = block.next()
    assert styles["make || exit 125 # this skips broken builds."] == "#fff1a8"
    assert [chunk_id_from_href(href=h) for h in _anchors(doc)] == ["doc-a/p2#0", "doc-a/p2#0"]


def test_a_quoted_answer_in_the_chat_window_stays_literal(qtbot: QtBot, tmp_path: Path) -> None:
    from app.chat.chat_pane import ChatPane
    from app.chat.conversations import ConversationStore
    from engine.wire import AnswerDone, CitationsEvent, DoneEvent, TokenEvent

    pane = ChatPane(store=ConversationStore(folder=tmp_path))
    qtbot.addWidget(pane)
    pane.show()
    qtbot.waitUntil(lambda: pane.loaded, timeout=5000)
    pane.set_ready(True)
    stream = pane.ask(question="How do I skip broken builds?")
    stream.deliver(CitationsEvent(citations=CITATIONS))
    stream.deliver(TokenEvent(text=QUOTED))
    stream.deliver(DoneEvent(done=AnswerDone(answer=QUOTED, mode="extractive")))
    assert pane.current.exchanges[-1].quoted
    assert "~/test.sh ~ and gnuplot*gray*scale __init__" in pane.transcript.toPlainText()

    stream = pane.ask(question="And with a model?")
    done = AnswerDone(answer="Use **make** [1].", mode="generative", model="m")
    stream.deliver(DoneEvent(done=done))
    assert not pane.current.exchanges[-1].quoted
    assert "Use make [1]." in pane.transcript.toPlainText()  # the model's Markdown renders


def test_the_sources_sentences_after_a_model_answer_stay_literal(
    qtbot: QtBot, tmp_path: Path
) -> None:
    from app.chat.chat_pane import ChatPane
    from app.chat.conversations import ConversationStore
    from engine.wire import AnswerDone, CitationsEvent, DoneEvent, TokenEvent

    store = ConversationStore(folder=tmp_path)
    pane = ChatPane(store=store)
    qtbot.addWidget(pane)
    pane.show()
    qtbot.waitUntil(lambda: pane.loaded, timeout=5000)
    pane.set_ready(True)
    written = "Use **make** to skip them."
    answer = f"{written}\n\n{QUOTED}"
    stream = pane.ask(question="How do I skip broken builds?")
    stream.deliver(CitationsEvent(citations=CITATIONS))
    stream.deliver(TokenEvent(text=answer))
    done = AnswerDone(answer=answer, mode="generative", model="m", quoted_from=len(written) + 2)
    stream.deliver(DoneEvent(done=done))
    shown = pane.transcript.toPlainText()
    assert "Use make to skip them." in shown  # the model's Markdown renders
    assert "~/test.sh ~ and gnuplot*gray*scale __init__" in shown  # the documents' text as written
    (saved,) = store.load_all()
    assert saved.exchanges[-1].quoted_from == len(written) + 2


def test_a_long_code_line_wraps_instead_of_scrolling_the_transcript_sideways(
    qtbot: QtBot,
) -> None:
    from app.chat.transcript_view import TranscriptView

    view = TranscriptView(hint="")
    qtbot.addWidget(view)
    view.resize(420, 300)
    view.show()
    long_line = "git bisect start HEAD v2.6 -- " + " ".join(f"path/to/file{i}.c" for i in range(30))
    answer = f"Run this:\n\n```bash\n{long_line}\n```\n\nThen test each commit."
    QTextCursor(view.document()).insertFragment(
        markdown_fragment(text=answer, citations=CITATIONS, dark=False)
    )
    qtbot.waitUntil(lambda: view.document().size().height() > 0)
    assert long_line in view.document().toPlainText()  # nothing cut, only wrapped
    assert view.horizontalScrollBar().maximum() == 0
