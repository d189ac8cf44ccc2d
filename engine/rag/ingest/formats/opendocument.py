"""OpenDocument text (.odt) through odfpy: headings, paragraphs, lists and
tables in document order, as one flow of text (ODF stores no pages)."""

from __future__ import annotations

import contextlib
import io
import re
import xml.sax
from pathlib import Path

from odf.element import Element, Node
from odf.namespaces import DRAWNS, OFFICENS, TABLENS, TEXTNS
from odf.office import Body
from odf.opendocument import OpenDocument, load

from engine.errors import ParseError
from engine.rag.ingest.formats.base import ParsedDocument, one_line, single_page
from engine.rag.ingest.formats.containers import DAMAGED_ZIP_ERRORS, open_zip, read_member
from engine.rag.ingest.text_cleanup import normalize_plain_text

_TEXT_MIMETYPE = "application/vnd.oasis.opendocument.text"
# Generated copies of text found elsewhere (table of contents, indexes), and
# text that is not part of the document (comments, deleted tracked changes).
_SKIPPED = frozenset(
    {
        (TEXTNS, "table-of-content"),
        (TEXTNS, "alphabetical-index"),
        (TEXTNS, "illustration-index"),
        (TEXTNS, "table-index"),
        (TEXTNS, "object-index"),
        (TEXTNS, "user-index"),
        (TEXTNS, "bibliography"),
        (TEXTNS, "tracked-changes"),
        (OFFICENS, "annotation"),
        (OFFICENS, "annotation-end"),
        (TEXTNS, "note-citation"),
        (TEXTNS, "sequence-decls"),
        (OFFICENS, "forms"),
    }
)
_PARAGRAPHS = frozenset({(TEXTNS, "p"), (TEXTNS, "h")})
# Crafted files can nest lists or sections thousands deep; below this the
# text is still read, without further structure.
_MAX_DEPTH = 100
_WHITESPACE_RUN = re.compile(r"[ \t\r\n]+")


def parse_odt(*, path: Path, data: bytes) -> ParsedDocument:
    archive = open_zip(data=data, kind=".odt")
    with archive:
        manifest = read_member(archive=archive, name="META-INF/manifest.xml", kind=".odt")
        # An encrypted part leaves content.xml as ciphertext; say so rather
        # than report the XML error reading it would give.
        if b"encryption-data" in manifest:
            raise ParseError(".odt file is encrypted (password protected)")
    try:
        # odfpy prints a part it cannot parse, whole, to stdout (pandoc's styles.xml,
        # whose namespace declarations are on lines of their own, is one): a
        # `--json` command's stdout must stay JSON.
        with contextlib.redirect_stdout(io.StringIO()):
            document = load(io.BytesIO(data))
    except (KeyError, IndexError, xml.sax.SAXException, ValueError) as e:
        raise ParseError(f".odt file is damaged ({type(e).__name__}: {e})"[:300]) from e
    except DAMAGED_ZIP_ERRORS as e:
        raise ParseError(f".odt file is damaged ({e})"[:300]) from e
    if not str(document.mimetype).startswith(_TEXT_MIMETYPE):
        raise ParseError(f"not an OpenDocument text file (it is {document.mimetype})"[:300])
    body = _office_text(document)
    if body is None:
        raise ParseError(".odt file is damaged (content.xml holds no document body)")
    headings: list[str] = []
    blocks = _blocks(node=body, depth=0, indent="", headings=headings)
    text = "\n\n".join(block for block in blocks if block.strip())
    return single_page(path=path, text=normalize_plain_text(text=text), headings=headings)


def _office_text(document: OpenDocument) -> Element | None:
    """The <office:text> element of the body. Not odfpy's `document.text`, which
    is the body's first child, whatever it is: in a file pandoc wrote, the
    whitespace before <office:text>, so a 5,600-word document read as empty."""
    for body in document.getElementsByType(Body):
        for child in body.childNodes:
            if child.nodeType == Node.ELEMENT_NODE and child.qname == (OFFICENS, "text"):
                return child
    return None


def _blocks(*, node: Element, depth: int, indent: str, headings: list[str]) -> list[str]:
    """Paragraph-level blocks under `node`, in order; the headings' texts are
    appended to `headings`."""
    blocks: list[str] = []
    for child in node.childNodes:
        if child.nodeType != Node.ELEMENT_NODE or child.qname in _SKIPPED:
            continue
        if child.qname in _PARAGRAPHS or depth >= _MAX_DEPTH:
            blocks.append(_inline(node=child).strip())
            if child.qname == (TEXTNS, "h") and blocks[-1]:
                headings.append(one_line(blocks[-1]))
        elif child.qname == (TEXTNS, "list"):
            blocks.append(_list_text(node=child, depth=depth + 1, indent=indent))
        elif child.qname == (TABLENS, "table"):
            blocks.append(_table_text(node=child))
        else:  # sections, frames, text boxes, table row groups: look inside
            blocks.extend(_blocks(node=child, depth=depth + 1, indent=indent, headings=headings))
    return blocks


def _list_text(*, node: Element, depth: int, indent: str) -> str:
    lines: list[str] = []
    for item in node.childNodes:
        if item.nodeType != Node.ELEMENT_NODE:
            continue
        if item.qname not in ((TEXTNS, "list-item"), (TEXTNS, "list-header")):
            continue
        first = True
        for child in item.childNodes:
            if child.nodeType != Node.ELEMENT_NODE:
                continue
            if child.qname == (TEXTNS, "list") and depth < _MAX_DEPTH:
                lines.append(_list_text(node=child, depth=depth + 1, indent=indent + "  "))
                continue
            text = _inline(node=child).strip()
            if text:
                lines.append(f"{indent}{'- ' if first else '  '}{text}")
                first = False
    return "\n".join(line for line in lines if line)


def _table_text(*, node: Element) -> str:
    rows: list[str] = []
    for row in _descendants(node, (TABLENS, "table-row")):
        cells = [
            one_line(_inline(node=cell))
            for cell in row.childNodes
            if cell.nodeType == Node.ELEMENT_NODE and cell.qname == (TABLENS, "table-cell")
        ]
        cells = [cell for cell in cells if cell]
        if cells:
            rows.append(" | ".join(cells))
    return "\n".join(rows)


def _descendants(node: Element, qname: tuple[str, str]) -> list[Element]:
    """Elements named `qname` below `node`, not looking inside nested tables."""
    found: list[Element] = []
    stack = list(reversed(node.childNodes))
    while stack:
        child = stack.pop()
        if child.nodeType != Node.ELEMENT_NODE:
            continue
        if child.qname == qname:
            found.append(child)
        elif child.qname != (TABLENS, "table"):
            stack.extend(reversed(child.childNodes))
    return found


def _inline(*, node: Element) -> str:
    """The text of a paragraph (or of anything, flattened), with ODF's encoded
    spaces, tabs and line breaks restored. Iterative: nesting can be deep."""
    parts: list[str] = []
    stack: list[Element] = [node]
    while stack:
        current = stack.pop()
        if current.nodeType == Node.TEXT_NODE:
            # ODF collapses whitespace in text like HTML does; wanted spaces,
            # tabs and breaks are elements (text:s, text:tab, text:line-break).
            parts.append(_WHITESPACE_RUN.sub(" ", current.data))
            continue
        if current.nodeType != Node.ELEMENT_NODE or current.qname in _SKIPPED:
            continue
        name = current.qname
        if name == (TEXTNS, "s"):
            parts.append(" " * _space_count(current.getAttrNS(TEXTNS, "c")))
        elif name == (TEXTNS, "tab"):
            parts.append("\t")
        elif name == (TEXTNS, "line-break"):
            parts.append("\n")
        elif current is not node and (name in _PARAGRAPHS or name == (DRAWNS, "text-box")):
            # Paragraphs inside a text box, a note or a table cell.
            parts.append("\n")
            stack.extend(reversed(current.childNodes))
        else:
            stack.extend(reversed(current.childNodes))
    return "".join(parts)


def _space_count(value: str | None) -> int:
    # text:s c="n" stands for n spaces; a crafted n must not allocate gigabytes.
    try:
        return min(max(int(value or 1), 1), 100)
    except ValueError:
        return 1
