"""HTML through BeautifulSoup: visible text with paragraph and line breaks where
the blocks are, without scripts, styles and navigation. EPUB chapters and HTML
e-mail bodies use html_to_text too."""

from __future__ import annotations

import re
from pathlib import Path

from bs4 import BeautifulSoup, Comment, Doctype, NavigableString, ProcessingInstruction, Tag

from engine.errors import ParseError
from engine.rag.ingest.formats.base import Heading, PageText, ParsedDocument, one_line
from engine.rag.ingest.text_cleanup import normalize_plain_text

# Elements whose text is never document content.
_HTML_DROP = frozenset(
    {
        "script",
        "style",
        "noscript",
        "template",
        "nav",
        "svg",
        "canvas",
        "iframe",
        "head",
        "button",
        "select",
        "form",
        "object",
        "embed",
        # MathML's source copies (TeX, content markup): its presentation elements
        # ("<mn>1</mn><mi>kΩ</mi>") are read as text.
        "annotation",
        "annotation-xml",
    }
)
# Elements that start a new paragraph (blank line) or a new line.
_HTML_PARAGRAPHS = frozenset(
    {
        "p",
        "div",
        "section",
        "article",
        "main",
        "header",
        "footer",
        "aside",
        "blockquote",
        "pre",
        "table",
        "ul",
        "ol",
        "dl",
        "figure",
        "figcaption",
        "address",
        "details",
        "summary",
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
        "hr",
        "body",
    }
)
_HTML_HEADINGS = frozenset({"h1", "h2", "h3", "h4", "h5", "h6"})
_HTML_LINES = frozenset({"li", "dt", "dd", "tr", "br", "caption", "option"})
_HTML_CELLS = frozenset({"td", "th"})
_WHITESPACE_RUN = re.compile(r"\s+")
# Break markers from the private-use area, resolved in _join_html_parts.
_PARAGRAPH_MARK, _LINE_MARK, _CELL_MARK = "\ue000", "\ue001", "\ue002"
# Where a heading's text starts: kept through the joining and the clean-up, then
# taken out with its offset (html_text_and_headings).
_HEADING_MARK = "\ue003"
_HEADING_AT = re.compile(_HEADING_MARK + " ?")
_NO_MARKERS = {0xE000: None, 0xE001: None, 0xE002: None, 0xE003: None}
_MARK_RUN = re.compile(r"\s*[\ue000-\ue002](?:[\s\ue000-\ue002])*")


def parse_html(*, path: Path, data: bytes) -> ParsedDocument:
    if b"\x00" in data[:4096] and not data.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise ParseError("not an HTML file (binary content)")
    text, headings = html_text_and_headings(data=data)
    if not text.strip():
        raise ParseError("no text in the file")
    page = PageText(number=None, text=text, headings=headings)
    return ParsedDocument(path=path, pages=[page], page_count=None)


def html_to_text(*, data: bytes | str, keep_title: bool = True) -> str:
    """Cleaned visible text of an HTML document. Given bytes, BeautifulSoup
    honours a BOM or <meta charset> and otherwise guesses, which beats assuming
    UTF-8 for old saved pages. `keep_title=False` drops <title>, for pages whose
    title is the same on every page (EPUB chapters)."""
    return html_text_and_headings(data=data, keep_title=keep_title)[0]


def html_text_and_headings(
    *, data: bytes | str, keep_title: bool = True
) -> tuple[str, tuple[Heading, ...]]:
    """html_to_text, and its headings (h1-h6) where they stand in it. Where the
    element is, not where its words are first found: a page's table of contents
    names every heading before the first one (SQLite's pages, DocBook's chapters),
    and a search from the top put every heading there, so that every passage of the
    page was labelled with its last heading."""
    soup = BeautifulSoup(data, "html.parser")
    title = [_html_title(soup=soup)] if keep_title else []
    titles: list[str] = []
    marked = _join_html_parts(parts=[*title, *_html_text_parts(root=soup, headings=titles)])
    return _take_heading_marks(text=marked, titles=titles)


def _take_heading_marks(*, text: str, titles: list[str]) -> tuple[str, tuple[Heading, ...]]:
    """`text` without its heading marks, and a Heading at each mark's place."""
    pieces: list[str] = []
    headings: list[Heading] = []
    at = 0
    length = 0
    for n, match in enumerate(_HEADING_AT.finditer(text)):
        pieces.append(text[at : match.start()])
        length += match.start() - at
        at = match.end()
        if n < len(titles):
            headings.append(Heading(offset=length, title=titles[n][:200]))
    pieces.append(text[at:])
    return "".join(pieces), tuple(headings)


def _html_title(*, soup: BeautifulSoup) -> str:
    title = soup.title.get_text(" ", strip=True).translate(_NO_MARKERS) if soup.title else ""
    first_heading = soup.find(["h1", "h2"])
    if title and first_heading and first_heading.get_text(" ", strip=True) == title:
        return ""  # the page repeats it as its heading
    return f"{title}{_PARAGRAPH_MARK}" if title else ""


def _html_text_parts(*, root: Tag, headings: list[str]) -> list[str]:
    """Text of the tree with break markers where blocks begin and end; the
    headings met are appended to `headings`. Iterative, because unclosed tags in
    real pages nest thousands deep."""
    parts: list[str] = []
    # Nodes still to visit; plain str entries are markers to emit on the way out.
    stack: list[Tag | NavigableString | str] = [root]
    while stack:
        node = stack.pop()
        if isinstance(node, NavigableString):
            if not isinstance(node, (Comment, Doctype, ProcessingInstruction)):
                # Spaces between inline elements matter ("a <b>b</b>"); runs of
                # them, source newlines and stray marker characters do not.
                parts.append(_WHITESPACE_RUN.sub(" ", node.translate(_NO_MARKERS)))
            continue
        if isinstance(node, str):
            parts.append(node)
            continue
        name = node.name.lower() if node.name else ""
        if name in _HTML_DROP:
            continue
        if name == "img":
            parts.append(_inline_alt(node))
            continue
        heading = one_line(node.get_text(" ")) if name in _HTML_HEADINGS else ""
        marker = ""
        if name in _HTML_PARAGRAPHS:
            marker = _PARAGRAPH_MARK
        elif name in _HTML_LINES:
            marker = _LINE_MARK
        elif name in _HTML_CELLS:
            marker = _CELL_MARK
        if marker and marker != _CELL_MARK:
            parts.append(marker)
        if heading:
            headings.append(heading)
            parts.append(_HEADING_MARK)
        stack.append(marker)
        stack.extend(reversed(list(node.children)))
    return parts


# An alt text that is only the picture's file name, as converters leave it.
_FILE_NAME = re.compile(r"^\S+\.(?:png|jpe?g|gif|svg|webp)$", re.IGNORECASE)


def _inline_alt(image: Tag) -> str:
    """The alt text of an image set in running text, where it stands for words: a
    formula drawn as a picture ("una resistencia de <img alt="1~k\\Omega">"), a
    symbol. A picture of its own (a figure, a screenshot) says nothing in the text."""
    alt = " ".join(str(image.get("alt") or "").split())
    if not alt or _FILE_NAME.search(alt):
        return ""
    parent = image.parent
    inline = parent is not None and any(
        isinstance(n, NavigableString) and n.strip() for n in parent.children
    )
    return f" {alt} " if inline else ""


def _join_html_parts(*, parts: list[str]) -> str:
    """Resolve the markers: a run of them is one paragraph break if any of them
    asks for one, else one line break (so list items do not get blank lines)."""

    def resolve(match: re.Match[str]) -> str:
        run = match.group(0)
        if _PARAGRAPH_MARK in run:
            return "\n\n"
        if _LINE_MARK in run:
            return "\n"
        return " | "

    text = _MARK_RUN.sub(resolve, "".join(parts))
    lines = [" ".join(line.split()) for line in text.split("\n")]
    # A row's last cell leaves a separator behind, the first cell one in front.
    lines = [line.strip("| ").strip() if "|" in line else line for line in lines]
    return normalize_plain_text(text="\n".join(lines))
