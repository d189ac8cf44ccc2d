"""Writing a conversation into the transcript's QTextDocument.

Answers are Markdown (code blocks, lists, tables) with the [n] markers turned
into `cite:` links before parsing, so a marker stays clickable wherever the
Markdown puts it. Model output may hold HTML: it is parsed with HTML off, so it
shows as text and never as markup.
"""

from __future__ import annotations

import html
from dataclasses import replace

from PySide6.QtGui import (
    QColor,
    QTextBlockFormat,
    QTextCharFormat,
    QTextCursor,
    QTextDocument,
    QTextDocumentFragment,
    QTextFormat,
)

from app.chat.answer_render import answer_markdown, quoted_html
from app.chat.conversations import Exchange
from engine.wire import Citation


def transcript_css(*, dark: bool) -> str:
    quiet = "#a0a8b4" if dark else "#5b6472"
    failed = "#ff8a80" if dark else "#b42318"
    link = "#7fb0ff" if dark else "#1d5fd1"
    key = "#4a4320" if dark else "#fff1a8"
    return f"""
.question {{ font-weight: 600; }}
.who {{ color: {quiet}; font-size: small; }}
.note {{ color: {quiet}; font-size: small; }}
.failed {{ color: {failed}; }}
.pending {{ color: {quiet}; font-style: italic; }}
a {{ color: {link}; text-decoration: none; }}
.key {{ background-color: {key}; font-weight: 600; }}
"""


def spaced(*, top: float) -> QTextBlockFormat:
    fmt = QTextBlockFormat()
    fmt.setTopMargin(top)
    return fmt


def escape(text: str) -> str:
    return html.escape(text, quote=False).replace("\n", "<br>")


def markdown_fragment(*, text: str, citations: list[Citation], dark: bool) -> QTextDocumentFragment:
    """The answer parsed as Markdown, code blocks shaded, as a fragment to insert."""
    doc = QTextDocument()
    doc.setMarkdown(
        answer_markdown(text=text, citations=citations),
        QTextDocument.MarkdownFeature.MarkdownDialectGitHub
        | QTextDocument.MarkdownFeature.MarkdownNoHTML,
    )
    code_bg = QColor("#2b2f36" if dark else "#f3f4f6")
    link = QColor("#7fb0ff" if dark else "#1d5fd1")
    block = doc.begin()
    while block.isValid():
        fmt = block.blockFormat()
        if fmt.hasProperty(QTextFormat.Property.BlockCodeFence) or fmt.hasProperty(
            QTextFormat.Property.BlockCodeLanguage
        ):
            fmt.setBackground(code_bg)
            fmt.setLeftMargin(6)
            # Qt lays code out unbroken: one long line scrolled the whole transcript
            # sideways and cut every answer's first line at the view's edge.
            fmt.setNonBreakableLines(False)
            cursor = QTextCursor(block)
            cursor.setBlockFormat(fmt)
        it = block.begin()
        while not it.atEnd():
            frag = it.fragment()
            if frag.isValid() and frag.charFormat().isAnchor():
                cursor = QTextCursor(doc)
                cursor.setPosition(frag.position())
                cursor.setPosition(frag.position() + frag.length(), QTextCursor.MoveMode.KeepAnchor)
                cf = QTextCharFormat()
                cf.setForeground(link)
                cf.setFontUnderline(False)
                cursor.mergeCharFormat(cf)
            it += 1
        block = block.next()
    return QTextDocumentFragment(doc)


def as_written(exchanges: tuple[Exchange, ...], *, i: int) -> Exchange:
    """Exchange i as the transcript shows it: a note already shown above in the
    conversation ("No language model is installed…") is not repeated."""
    e = exchanges[i]
    if e.note and any(earlier.note == e.note for earlier in exchanges[:i]):
        return replace(e, note="")
    return e


def write_question(*, cursor: QTextCursor, question: str, first: bool) -> None:
    if first:
        cursor.setBlockFormat(spaced(top=0))
    else:
        cursor.insertBlock(spaced(top=22))
    cursor.insertHtml('<span class="who">You</span>')
    cursor.insertBlock(spaced(top=2))
    cursor.insertHtml(f'<span class="question">{escape(question)}</span>')
    cursor.insertBlock(spaced(top=14))
    cursor.insertHtml('<span class="who">RAGDoll</span>')
    cursor.insertBlock(spaced(top=2))
    cursor.setCharFormat(QTextCharFormat())


def write_waiting(*, cursor: QTextCursor, exchange: Exchange, streaming: bool) -> None:
    """What stands where no answer text is yet: what the engine is doing, or none came."""
    if streaming and exchange.citations:
        # The sources are on screen: the search is over, the model reads them.
        n = len(exchange.citations)
        found = f"{n} passage{'s' if n != 1 else ''}"
        cursor.insertHtml(f'<span class="pending">Writing the answer from {found}…</span>')
    elif streaming:
        cursor.insertHtml('<span class="pending">Searching your documents…</span>')
    elif not exchange.error and not exchange.stopped:
        cursor.insertHtml('<span class="note">(no answer)</span>')


def write_answer(*, cursor: QTextCursor, exchange: Exchange, streaming: bool, dark: bool) -> None:
    """The answer part of an exchange, at `cursor` (the end of the document)."""
    cursor.setCharFormat(QTextCharFormat())
    citations = list(exchange.citations)
    written, quoted = exchange.answer, ""
    if exchange.quoted:
        written, quoted = "", exchange.answer
    elif exchange.quoted_from is not None and not streaming:
        at = min(exchange.quoted_from, len(exchange.answer))
        written, quoted = exchange.answer[:at].rstrip(), exchange.answer[at:].lstrip("\n")
    if written:
        cursor.insertFragment(markdown_fragment(text=written, citations=citations, dark=dark))
    if quoted:
        if written:
            cursor.insertBlock(spaced(top=8))
        # Quotations are the documents' own text: "~/test.sh ... ~" or "gnuplot*gray"
        # must read as written, so they are escaped, never parsed as Markdown.
        cursor.insertHtml(quoted_html(text=quoted, citations=citations))
    if not exchange.answer:
        write_waiting(cursor=cursor, exchange=exchange, streaming=streaming)
    if exchange.stopped:
        # insertHtml drops a leading space ("the column(stopped)"): a plain one first.
        cursor.insertText(" ")
        cursor.insertHtml('<span class="note">(stopped)</span>')
    if exchange.error:
        if exchange.answer:
            cursor.insertBlock()
        cursor.insertHtml(
            f'<span class="failed">The answer failed: {escape(exchange.error)}</span>'
        )
    if exchange.note:
        cursor.insertBlock(spaced(top=8))
        cursor.insertHtml(f'<span class="note">{escape(exchange.note)}</span>')
