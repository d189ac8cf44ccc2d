"""Turning answer text and citations into what the chat pane shows.

Pure functions (no widgets) so that the tricky parts — markers split across
streamed tokens, HTML escaping, links that survive odd chunk ids — are tested
without a window.
"""

from __future__ import annotations

import html
import re
from pathlib import PurePath
from urllib.parse import quote, unquote

from engine.wire import Citation

CITE_SCHEME = "cite"

# "[1]" and also "[1, 2]": models write both.
_MARKER = re.compile(r"\[(\d+(?:\s*,\s*\d+)*)\]")
_SPACE = re.compile(r"\s+")
_KEY_MARKER = re.compile(r" \[\d+\](?=\S*$)")


def citation_href(*, chunk_id: str) -> str:
    # Chunk ids are the engine's business (they may hold "/" or "#"): quote
    # everything so the URL survives QUrl's parsing unchanged.
    return f"{CITE_SCHEME}:{quote(chunk_id, safe='')}"


def chunk_id_from_href(*, href: str) -> str | None:
    """The chunk id behind a citation link, or None for any other link."""
    prefix = f"{CITE_SCHEME}:"
    if not href.startswith(prefix):
        return None
    return unquote(href[len(prefix) :]) or None


def answer_html(*, text: str, citations: list[Citation]) -> str:
    """The answer as inline HTML: escaped, line breaks kept, [n] markers as links.

    Inline only (no <p>): the chat pane replaces the answer in place on every
    token, and block-level HTML would split it into several blocks."""
    by_index = {c.index: c for c in citations}
    out: list[str] = []
    pos = 0
    for match in _MARKER.finditer(text):
        out.append(_escape_inline(text[pos : match.start()]))
        out.append(_marker_html(numbers=match.group(1), by_index=by_index))
        pos = match.end()
    out.append(_escape_inline(text[pos:]))
    return "".join(out)


def quoted_html(*, text: str, citations: list[Citation]) -> str:
    """An answer quoted from the documents as inline HTML: literal text (no Markdown),
    [n] markers as links, and the answer sentence (the first paragraph) highlighted
    wherever it stands inside the quotations that follow it."""
    paragraphs = text.split("\n\n")
    # The answer's marker sits before its closing punctuation ("... tested [2].").
    key = _KEY_MARKER.sub("", paragraphs[0].strip())
    out = [answer_html(text=paragraphs[0], citations=citations)]
    for paragraph in paragraphs[1:]:
        out.append(_highlighted(text=paragraph, key=key, citations=citations))
    return "<br><br>".join(out)


def _highlighted(*, text: str, key: str, citations: list[Citation]) -> str:
    at = text.find(key) if len(key) > 3 else -1
    if at < 0 and key.endswith("."):  # a list item quoted with a full stop added
        key = key[:-1]
        at = text.find(key) if len(key) > 3 else -1
    if at < 0:
        return answer_html(text=text, citations=citations)
    before, rest = text[:at], text[at + len(key) :]
    return (
        answer_html(text=before, citations=citations)
        + f'<span class="key">{_escape_inline(key)}</span>'
        + answer_html(text=rest, citations=citations)
    )


def _marker_html(*, numbers: str, by_index: dict[int, Citation]) -> str:
    links = []
    for part in numbers.split(","):
        n = int(part.strip())
        citation = by_index.get(n)
        if citation is None:
            # A marker the model invented: show it, but do not pretend it links.
            links.append(str(n))
        else:
            title = html.escape(source_title(citation=citation), quote=True)
            href = citation_href(chunk_id=citation.chunk_id)
            links.append(f'<a href="{href}" title="{title}">{n}</a>')
    return "[" + ", ".join(links) + "]"


def _escape_inline(text: str) -> str:
    return html.escape(text, quote=False).replace("\n", "<br>")


def file_name(*, path: str) -> str:
    # PurePath splits on "/" only on POSIX; an engine on Windows sends "\".
    return PurePath(path.replace("\\", "/")).name or path


def source_title(*, citation: Citation) -> str:
    """ "report.pdf — page 3", or just the file name for formats without pages;
    then the section when the document has one: "… — 5.13 Other debian/* files"."""
    title = page_title(path=citation.path, page=citation.page)
    section = citation.section
    return f"{title} — {elide(text=section, limit=80)}" if section else title


# What a "page" is in formats that have none (docs/formats.md).
_PAGE_WORDS = {
    ".pptx": "slide",
    ".xlsx": "sheet",
    ".epub": "chapter",
    ".mbox": "message",
}


def page_word(*, path: str) -> str:
    return _PAGE_WORDS.get(PurePath(path).suffix.lower(), "page")


def page_title(*, path: str, page: int | None) -> str:
    name = file_name(path=path)
    return name if page is None else f"{name} — {page_word(path=path)} {page}"


def elide(*, text: str, limit: int) -> str:
    """Whitespace collapsed and cut at a word boundary near `limit` characters."""
    flat = _SPACE.sub(" ", text).strip()
    if len(flat) <= limit:
        return flat
    cut = flat[: limit - 1]
    space = cut.rfind(" ")
    if space > limit // 2:
        cut = cut[:space]
    return cut.rstrip(" ,.;:") + "…"


# Fenced code blocks and inline code spans: a "[1]" inside code is code.
_CODE = re.compile(r"(```.*?(?:```|\Z)|~~~.*?(?:~~~|\Z)|`[^`\n]*`)", re.DOTALL)


def answer_markdown(*, text: str, citations: list[Citation]) -> str:
    """The answer as Markdown with each known [n] marker turned into a link.

    The brackets stay outside the link, escaped, so "[1]" reads as before and
    only the number is the link (as in `answer_html`). Markers inside code are
    left alone. A marker not yet complete in a stream ("[1") stays plain text
    until its "]" arrives."""
    by_index = {c.index: c for c in citations}
    out: list[str] = []
    pos = 0
    for code in _CODE.finditer(text):
        out.append(_link_markers(text=text[pos : code.start()], by_index=by_index))
        out.append(code.group(0))
        pos = code.end()
    out.append(_link_markers(text=text[pos:], by_index=by_index))
    return "".join(out)


def _link_markers(*, text: str, by_index: dict[int, Citation]) -> str:
    def one(match: re.Match[str]) -> str:
        links = []
        for part in match.group(1).split(","):
            n = int(part.strip())
            citation = by_index.get(n)
            if citation is None:
                links.append(str(n))
            else:
                links.append(f"[{n}](<{citation_href(chunk_id=citation.chunk_id)}>)")
        return "\\[" + ", ".join(links) + "\\]"

    return _MARKER.sub(one, text)


def copy_text(*, answer: str, citations: list[Citation]) -> str:
    """An answer and its sources as plain text for the clipboard."""
    lines = [answer.strip()]
    if citations:
        lines += ["", "Sources:"]
        for c in sorted(citations, key=lambda c: c.index):
            lines.append(f"[{c.index}] {source_title(citation=c)} ({c.path})")
            lines.append(f"    {elide(text=c.text, limit=300)}")
    return "\n".join(lines)
