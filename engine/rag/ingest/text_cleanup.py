"""Pure string clean-up for extracted document text.

PDF extraction (PDFium) gives text as the page draws it: words hyphenated at line
ends (PDFium marks those hyphens with U+FFFE and joins the lines), ligature
glyphs, running headers and footers with page numbers on every page. Those
defects hurt both retrieval (a header repeated on every chunk matches every
query about its words) and the viewer, so the cleaned text is what
is stored and what chunk spans index into.

Nothing here touches files; `engine.rag.ingest.parsers` calls these functions.
"""

from __future__ import annotations

import codecs
import re
import unicodedata
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

# Alphabetic Presentation Forms (ﬀ ﬁ ﬂ ﬃ ﬄ ﬅ ﬆ ...). NFKC is only applied to this
# block: NFKC on the whole text would also rewrite ², ½, ™, full-width forms and
# more, which changes meaning; these ligatures are pure typesetting.
_LIGATURES = {cp: unicodedata.normalize("NFKC", chr(cp)) for cp in range(0xFB00, 0xFB07)}
_INVISIBLES = {
    0x00AD: None,  # soft hyphen: only a line-break hint
    0x200B: None,  # zero-width space
    0x200C: None,  # zero-width non-joiner
    0x200D: None,  # zero-width joiner
    0x2060: None,  # word joiner
    0xFEFF: None,  # stray BOM / zero-width no-break space
    0x00A0: " ",  # no-break space: it would otherwise stop whitespace collapsing
    0x202F: " ",
    0x2007: " ",
}
_CHAR_FIXES = {**_LIGATURES, **_INVISIBLES}
# PDF only: TeX's and groff's fonts map the ASCII tilde and circumflex of code and
# paths to spacing modifier letters ("˜/.bashrc", "${parameterˆpattern}" in the bash
# manual page), which neither a question's "~/.bashrc" nor a search for it matches.
_PDF_CHAR_FIXES = {**_CHAR_FIXES, 0x02DC: "~", 0x02C6: "^"}
# TeX builds an accented letter from a spacing accent and the letter after it
# ("P´eter", "Moir´e"); only vowels (and ç), so that "it´s" stays as typed.
_SPACING_ACCENTS = {"´": "\u0301", "¨": "\u0308", "˚": "\u030a", "ˇ": "\u030c", "¸": "\u0327"}
_BUILT_ACCENT = re.compile(r"(?<=[^\W\d_])([´¨˚ˇ¸])([aeiouyAEIOUYcC])")
# A backtick drawn as a combining grave over a space ("a ̀chroot ̀ed environment").
_LONE_GRAVE = re.compile(r"(?<![^\W\d_])\u0300")
# C1 control characters are never text; at the start of a line one stands for a
# list bullet (gnuplot's manual: "\x88 All evaluation of expressions ...").
_C1_BULLET = re.compile(r"(?m)^([ \t]*)[\x80-\x9f](?=[ \t])")
_C1 = re.compile(r"[\x80-\x9f]")
# Sphinx wraps a long line of a code block onto the next, drawing "˓→" (or "↪") at the
# start of the continuation and "␣" for a space broken at: the line as written.
# PDFium ends its lines with "\r\n".
_WRAPPED_AT_SPACE = re.compile(r"␣\r?\n[ \t]*(?:˓→|↪)")
_WRAPPED = re.compile(r"\r?\n[ \t]*(?:˓→|↪)")

_HSPACE = re.compile(r"[ \t\f\v\u2000-\u200a\u3000]+")
_MANY_BLANK_LINES = re.compile(r"\n{3,}")
# Table-of-contents leaders (". . . . . 12") cost a token per dot and mean nothing.
_DOT_LEADER = re.compile(r"(?: ?\.){4,}")
_LONE_SURROGATE = re.compile(r"[\ud800-\udfff]")
# "inter-\nnational", "пере-\nнести": a letter, a hyphen at the end of a line, a word
# on the next. Capitalised continuations ("Anglo-\nSaxon") keep their hyphen
# (`join_hyphenated_breaks` looks at the case, in any script).
_HYPHEN_BREAK = re.compile(r"(\w+)-\n[ \t]*([^\W\d_]\S*)[ \t]*\n?")
_HYPHENATED_WORD = re.compile(r"\b(\w+)-(\w+)\b")
# PDFium's mark for a hyphen it found at a line end (it has already joined the
# two lines); older builds use U+0002.
_SOFT_BREAK = re.compile(r"(\w*)[\ufffe\x02](\w*)")
_PAGE_WORD_NUMBER = re.compile(r"\bpage \d+")
# "35 / 57", "35 of 57": a page counter anywhere in a header line.
_PAGE_COUNTER = re.compile(r"\b\d+ ?(?:/|of) ?\d+\b")
_EDGE_NUMBER = re.compile(r"^\d+|\d+$")
_PAGE_NUMBER_LINE = re.compile(
    r"^(?:page\s*)?[-–—(\[]?\s*"
    r"(?:\d{1,4}|(?=[ivxlcdm])m{0,3}(?:cm|cd|d?c{0,3})(?:xc|xl|l?x{0,3})(?:ix|iv|v?i{0,3}))"
    r"\s*[-–—)\]]?"
    r"(?:\s*(?:of|/)\s*\d{1,4})?$",
    re.IGNORECASE,
)
# Lines within this many non-empty lines of the top or bottom of a page are
# candidates for running headers and footers.
_EDGE_LINES = 3
# A candidate line is a running header when it recurs at the same edge of at
# least this many other pages within _NEIGHBOUR_WINDOW pages. Looking at
# neighbours (not the whole document) catches chapter titles that change every
# few pages and left/right headers that alternate between even and odd pages.
_MIN_NEIGHBOURS = 2
_NEIGHBOUR_WINDOW = 4

_BINARY_SIGNATURES = (
    b"%PDF-",
    b"PK\x03\x04",
    b"\x89PNG",
    b"GIF8",
    b"\xff\xd8\xff",
    b"\x7fELF",
    b"MZ",
    b"\xd0\xcf\x11\xe0",  # OLE2: .doc, .xls, .msg
    b"\x1f\x8b",  # gzip
)
_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32-le"),
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)
# Share of control characters above which a decoded "text" is taken for binary.
# Real text has almost none; random bytes decoded as cp1252 give about 11%.
_MAX_CONTROL_SHARE = 0.02


@dataclass(frozen=True, kw_only=True)
class DecodedText:
    text: str
    encoding: str


class BinaryContentError(ValueError):
    """The bytes are not text; the parser turns this into a ParseError."""


def decode_text_bytes(*, data: bytes) -> DecodedText:
    """Decode a text file: BOM first, then BOM-less UTF-16, UTF-8, and cp1252.

    Raises BinaryContentError when the bytes look like anything but text."""
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            text = data[len(bom) :].decode(encoding, errors="replace")
            _refuse_binary_text(text=text)
            return DecodedText(text=text, encoding=encoding)
    if data.startswith(_BINARY_SIGNATURES):
        raise BinaryContentError("binary content")
    utf16 = _guess_bomless_utf16(data=data)
    if utf16 is not None:
        text = data.decode(utf16, errors="replace")
        _refuse_binary_text(text=text)
        return DecodedText(text=text, encoding=utf16)
    if b"\x00" in data:
        raise BinaryContentError("binary content")
    try:
        text = data.decode("utf-8")
        encoding = "utf-8"
    except UnicodeDecodeError:
        # cp1252 leaves five bytes undefined; a stray one should not lose the file.
        text = data.decode("cp1252", errors="replace")
        encoding = "cp1252"
    _refuse_binary_text(text=text)
    return DecodedText(text=text, encoding=encoding)


def _guess_bomless_utf16(*, data: bytes) -> str | None:
    """Notepad-style UTF-16 without a BOM: ASCII text then has a NUL in every
    other byte, all on the same side."""
    sample = data[:4096]
    if len(sample) < 4 or len(sample) % 2:
        return None
    even_nuls = sample[0::2].count(0)
    odd_nuls = sample[1::2].count(0)
    half = len(sample) // 2
    if odd_nuls > 0.4 * half and even_nuls < 0.02 * half:
        return "utf-16-le"
    if even_nuls > 0.4 * half and odd_nuls < 0.02 * half:
        return "utf-16-be"
    return None


def _refuse_binary_text(*, text: str) -> None:
    sample = text[:65536]
    if not sample:
        return
    controls = sum(1 for ch in sample if ch < " " and ch not in "\t\n\r\f")
    if "\x00" in sample or controls > _MAX_CONTROL_SHARE * len(sample):
        raise BinaryContentError("binary content")


def normalize_plain_text(*, text: str) -> str:
    """Light clean-up for text that was written as text (.txt, .md, .docx, HTML):
    newlines unified, invisible characters dropped, trailing spaces and runs of
    blank lines removed. Line structure is kept, since the viewer shows it."""
    text = unicodedata.normalize("NFC", text.replace("\r\n", "\n").replace("\r", "\n"))
    text = text.translate(_CHAR_FIXES)
    lines = [line.rstrip() for line in text.split("\n")]
    return _MANY_BLANK_LINES.sub("\n\n", "\n".join(lines)).strip("\n")


def clean_pdf_pages(*, pages: Sequence[str]) -> list[str]:
    """Clean the extracted text of every page of one PDF.

    Order matters: running headers are found on the raw lines (before
    hyphenation joins change them), hyphenation is decided with the vocabulary
    of the whole document."""
    fixed = [_normalize_pdf_whitespace(text=_fix_chars(text=page)) for page in pages]
    stripped = strip_running_lines(pages=fixed)
    vocabulary = _hyphenated_vocabulary(pages=stripped)
    return [
        _tidy_lines(
            text=join_hyphenated_breaks(
                text=join_soft_breaks(text=page, keep_hyphen=vocabulary), keep_hyphen=vocabulary
            )
        )
        for page in stripped
    ]


def _fix_chars(*, text: str) -> str:
    # PDF text can hold lone surrogates from broken ToUnicode maps; they cannot be
    # encoded as UTF-8 and would fail much later, in the store.
    text = _LONE_SURROGATE.sub("\ufffd", text)
    text = unicodedata.normalize("NFC", text.translate(_PDF_CHAR_FIXES))
    return _fix_pdf_glyphs(text=text)


def _fix_pdf_glyphs(*, text: str) -> str:
    """Characters PDF fonts draw for an accented letter, a backtick, a bullet or a
    wrapped code line, as written."""
    text = _BUILT_ACCENT.sub(_compose_accent, text)
    text = _LONE_GRAVE.sub("`", text)
    text = _C1.sub("", _C1_BULLET.sub(r"\1•", text))
    return _WRAPPED.sub("", _WRAPPED_AT_SPACE.sub(" ", text))


def _compose_accent(match: re.Match[str]) -> str:
    accent, letter = match.group(1), match.group(2)
    composed = unicodedata.normalize("NFC", letter + _SPACING_ACCENTS[accent])
    return composed if len(composed) == 1 else match.group(0)


def _normalize_pdf_whitespace(*, text: str) -> str:
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = _DOT_LEADER.sub(" … ", text)
    lines = [_HSPACE.sub(" ", line).strip() for line in text.split("\n")]
    return _MANY_BLANK_LINES.sub("\n\n", "\n".join(lines)).strip("\n")


def _tidy_lines(*, text: str) -> str:
    return _MANY_BLANK_LINES.sub("\n\n", text).strip()


def _hyphenated_vocabulary(*, pages: Sequence[str]) -> frozenset[str]:
    """Words that the document writes with a hyphen inside a line ("well-known").
    A line-end break of one of these keeps its hyphen; any other is a
    typesetting break and is joined."""
    found: set[str] = set()
    for page in pages:
        for line in page.split("\n"):
            for match in _HYPHENATED_WORD.finditer(line):
                found.add(f"{match.group(1)}-{match.group(2)}".lower())
    return frozenset(found)


def join_hyphenated_breaks(*, text: str, keep_hyphen: frozenset[str] = frozenset()) -> str:
    """Undo line-end hyphenation: "inter-\\nnational" -> "international".

    The rest of the broken word (with its punctuation) moves up to the first
    line, so no line is left empty and no paragraph break is invented; compounds
    listed in `keep_hyphen` are rejoined with their hyphen."""

    def join(match: re.Match[str]) -> str:
        head, tail = match.group(1), match.group(2)
        if not tail[0].islower():
            return match.group(0)
        word_tail = re.match(r"\w*", tail)
        joined_word = f"{head}-{word_tail.group(0) if word_tail else tail}".lower()
        hyphen = "-" if joined_word in keep_hyphen else ""
        return f"{head}{hyphen}{tail}\n"

    return _HYPHEN_BREAK.sub(join, text).rstrip("\n") + ("\n" if text.endswith("\n") else "")


def join_soft_breaks(*, text: str, keep_hyphen: frozenset[str] = frozenset()) -> str:
    """Undo the line-end hyphens PDFium marked: "distri\ufffebution" ->
    "distribution". A compound the document writes with a hyphen elsewhere, or
    a capitalised continuation ("Non\ufffeMaintainer"), keeps its hyphen."""

    def join(match: re.Match[str]) -> str:
        head, tail = match.group(1), match.group(2)
        if not head or not tail:
            return f"{head}{tail}"
        compound = f"{head}-{tail}"
        if compound.lower() in keep_hyphen or not tail[0].islower():
            return compound
        return f"{head}{tail}"

    return _SOFT_BREAK.sub(join, text)


def _line_key(line: str) -> str:
    """What makes two header lines "the same": case and spacing ignored, and so
    are page numbers: a number that starts or ends the line, or follows "page".
    "Page 3 of 9" matches "Page 4 of 9" and "Chapter 4: Setup 16" matches
    "Chapter 4: Setup 17", but "Step 3 of the setup." keeps its digit."""
    key = " ".join(line.lower().split())
    key = _PAGE_WORD_NUMBER.sub("page #", key)
    key = _PAGE_COUNTER.sub("# / #", key)
    return _EDGE_NUMBER.sub("#", key)


def _edges(lines: list[str]) -> tuple[list[int], list[int]]:
    filled = [i for i, line in enumerate(lines) if line.strip()]
    # On short pages the zones must not overlap, or the first page's title
    # would count as a footer too.
    size = min(_EDGE_LINES, len(filled) // 2)
    if size == 0:
        return filled, []
    return filled[:size], filled[-size:]


def strip_running_lines(*, pages: Sequence[str]) -> list[str]:
    """Remove running headers, footers and bare page numbers.

    A line near the top (or bottom) of a page is dropped when a line with the
    same key sits near the top (or bottom) of enough neighbouring pages. Bare page
    numbers at an edge are dropped whenever the document has several pages. The
    first page keeps its running header (it is mostly the title there)."""
    page_lines = [page.split("\n") for page in pages]
    if len(page_lines) < 3:
        return list(pages)
    top_keys: list[set[str]] = []
    bottom_keys: list[set[str]] = []
    for lines in page_lines:
        top, bottom = _edges(lines)
        top_keys.append({_line_key(lines[i]) for i in top})
        bottom_keys.append({_line_key(lines[i]) for i in bottom})

    cleaned: list[str] = []
    for index, lines in enumerate(page_lines):
        top, bottom = _edges(lines)
        drop: set[int] = set()
        for positions, keys in ((top, top_keys), (bottom, bottom_keys)):
            for i in positions:
                # The first page keeps its running header: there it is usually
                # the document's title, which queries use.
                exempt = index == 0 and keys is top_keys
                running = not exempt and _recurs_nearby(
                    key=_line_key(lines[i]), index=index, keys=keys
                )
                if running or _PAGE_NUMBER_LINE.match(lines[i].strip()):
                    drop.add(i)
        kept = [line for i, line in enumerate(lines) if i not in drop]
        cleaned.append("\n".join(kept).strip("\n"))
    return cleaned


def _recurs_nearby(*, key: str, index: int, keys: list[set[str]]) -> bool:
    if len(key) < 2:
        return False
    low = max(0, index - _NEIGHBOUR_WINDOW)
    high = min(len(keys), index + _NEIGHBOUR_WINDOW + 1)
    hits = sum(1 for j in range(low, high) if j != index and key in keys[j])
    # Short documents cannot offer many neighbours: there, all other pages will do.
    needed = min(_MIN_NEIGHBOURS, len(keys) - 1)
    return hits >= needed


def most_common_lines(*, pages: Sequence[str], top: int = 10) -> list[tuple[str, int]]:
    """Lines that recur most across pages (a diagnostic for docs/ingestion.md)."""
    counts: Counter[str] = Counter()
    for page in pages:
        counts.update({_line_key(line) for line in page.split("\n") if line.strip()})
    return counts.most_common(top)
