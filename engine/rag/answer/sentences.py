"""Sentence splitting for text extracted from PDFs, Word files and web pages.

Extracted text is messy: lines wrap mid-sentence, headings and list items have no final
punctuation, words are hyphenated across lines, and periods appear in "Fig. 3", "e.g.",
"3.5 mm" and "J. Smith". The extractive answerer quotes whole sentences, so a bad split
shows up directly in the answer.
"""

from __future__ import annotations

import re


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


# Never a sentence end, whatever follows.
_ABBREVIATIONS = _words(
    "e.g i.e cf vs viz approx incl al mr mrs ms dr prof st mt rev hon gen col capt lt "
    "sgt jr sr resp ca"
)
# Not a sentence end when a number follows ("Fig. 3", "No. 5", "p. 12", "Jan. 2024").
_BEFORE_NUMBER = _words(
    "fig figs no nos nr p pp vol vols eq eqs sec secs ch chap art para tab ref refs "
    "pt jan feb mar apr jun jul aug sep sept oct nov dec approx ca"
)
# A footnote as typeset text reads it: its own line, opening with the mark the text
# refers to it by ("∗This file has version number v2.1e", "†Walter wrote fix-cm").
# Typographic, not linguistic: the same in any language. Without it the footnote runs
# on into whatever line stood above it on the page (a code line, a table of contents)
# and is scored as part of that.
_FOOTNOTE = re.compile(r"^[∗†‡⁎]\s?[^\W\d_]")
# A word hyphenated across a line break, continued in lower case in any script
# ("main-\ntenance", "пере-\nнести").
_LINE_END_HYPHEN = re.compile(r"(\w)-\n\s*([^\W\d_])")
_BULLET = re.compile(r"^\s*(?:[•▪◦‣∙·*–—-]|\(?\d{1,2}[.)]|\(?[a-zA-Z][)]|\([ivx]{1,4}\))\s+")
# A sentence's end before a space: Latin, Greek and Cyrillic stops, the Arabic
# question mark and Urdu full stop, the Devanagari danda.
_BOUNDARY = re.compile(r"([.!?…؟۔।॥]+)([\"'”’)\]]*)\s+")
# What may stand before a sentence's first letter: a quote, a bracket, Spanish's
# inverted marks.
_OPENERS = "\"'“‘„«‹([¿¡"
_INITIALS = re.compile(r"^(?:[A-Za-z]\.)*[A-Za-z]$")  # "J", "U.S", "e.g"
_TERMINAL = ".!?…:;\"'”’)]。！？｡」』）؟۔।॥"
_CONTINUES = ",-–(/&"
_PROSE_STARTS = _words(
    "the a an and or but of to in on at by for with from as is are be was were it its "
    "this that these those which who when where if then than not no you we they he she"
)
_TERM_WORDS = 4  # a definition list's term is shorter; a line of prose is longer
# Sentences longer than this are usually tables or run-on PDF text: split at semicolons.
_LONG_SENTENCE_WORDS = 60
# Letters of scripts written without spaces between words (Han, kana, Thai, Lao,
# Myanmar, Khmer): a run of them is many words, so they are counted per
# CHARACTERS_PER_WORD and their full-width stops end a sentence with no space after.
UNSPACED = re.compile(
    "[\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff\u3040-\u30ff\u31f0-\u31ff"
    "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff66-\uff9d]"
)
CHARACTERS_PER_WORD = 2  # Chinese words average about 1.5 characters, Japanese 2-3
# A sentence of those scripts: up to its full-width stop(s) and any closing quote.
_FULLWIDTH_SENTENCE = re.compile(r".+?(?:[。！？｡]+[」』”’）)\]]*|$)", re.DOTALL)


def word_count(text: str) -> int:
    """Words of `text` in any script: its space-separated tokens, where a run of an
    unspaced script counts one word per CHARACTERS_PER_WORD letters."""
    unspaced = len(UNSPACED.findall(text))
    spaced = len(UNSPACED.sub(" ", text).split())
    return spaced + -(-unspaced // CHARACTERS_PER_WORD)


def split_sentences(text: str, *, min_words: int = 4) -> list[str]:
    """The sentences of `text` in order, whitespace-normalised, fragments dropped."""
    sentences: list[str] = []
    for segment in _segments(text):
        for sentence in _split_segment(segment):
            for part in _split_long(sentence):
                if word_count(part) >= min_words:
                    sentences.append(part)
    return sentences


def _segments(text: str) -> list[str]:
    """Runs of text that can hold sentences: paragraphs with wrapped lines joined, and
    headings and list items kept apart because nothing else marks their end."""
    text = text.replace("\r\n", "\n").replace("\r", "\n").replace("\u00a0", " ")
    text = text.replace("\u00ad", "")  # soft hyphens from PDFs
    # A word hyphenated across a line break: "main-\ntenance" -> "maintenance".
    text = _LINE_END_HYPHEN.sub(
        lambda m: m.group(1) + m.group(2) if m.group(2).islower() else m.group(0), text
    )
    segments: list[str] = []
    for paragraph in re.split(r"\n\s*\n", text):
        lines = [line.strip() for line in paragraph.split("\n") if line.strip()]
        if not lines:
            continue
        longest = max(len(line) for line in lines)
        current: list[str] = []
        previous = ""
        for n, line in enumerate(lines):
            following = lines[n + 1] if n + 1 < len(lines) else ""
            if current and _starts_new_segment(
                previous=previous, line=line, following=following, longest=longest
            ):
                segments.append(" ".join(current))
                current = []
            current.append(line)
            previous = line
        segments.append(" ".join(current))
    return [_BULLET.sub("", s).strip() for s in segments if s.strip()]


def _starts_new_segment(*, previous: str, line: str, following: str, longest: int) -> bool:
    if _BULLET.match(line) or _FOOTNOTE.match(line):
        return True
    if _is_term(previous=previous, line=line, following=following):
        return True
    if _is_row(previous=previous, line=line):
        return True
    if previous[-1] in _TERMINAL or previous[-1] in _CONTINUES:
        return False  # the sentence splitter handles the first; the second runs on
    if not _starts_sentence(line):
        return False  # a lowercase start continues the previous line
    # A line that stops well short of the paragraph's width without punctuation is a
    # heading, a label or a table row; a full-width line merely wrapped.
    return len(previous) < 0.7 * longest or longest < 40


def _is_row(*, previous: str, line: str) -> bool:
    """Lines that start with the same word are rows of a list or a table
    ("rgbcolor "0xRRGGBB" # ...", "rgbcolor "#RRGGBB" # ..."): each is read alone,
    not run into one long sentence. Wrapped prose starts two lines alike only with a
    function word."""
    first, head = previous.split(maxsplit=1)[0], line.split(maxsplit=1)[0]
    return first == head and len(first) > 1 and first.lower() not in _PROSE_STARTS


def _is_term(*, previous: str, line: str, following: str) -> bool:
    """A short line without punctuation between a finished sentence and a line of
    prose: the next term of a definition list ("/dev/tcp/host/port", "--onto
    <newbase>"), which would otherwise run on into that sentence because it does not
    start with a capital. Code lines in a row stay with the sentence they follow."""
    if previous[-1] not in ".!?" or line[-1] in _TERMINAL or line[-1] in _CONTINUES:
        return False
    if len(line.split()) >= _TERM_WORDS or len(following.split()) < _TERM_WORDS:
        return False
    if not _starts_sentence(following):
        return False
    return not _is_abbreviation(previous[:-1], line)


def _split_segment(segment: str) -> list[str]:
    segment = " ".join(segment.split())
    if UNSPACED.search(segment):
        pieces = [m.group().strip() for m in _FULLWIDTH_SENTENCE.finditer(segment)]
        return [s for piece in pieces if piece for s in _split_spaced(piece)]
    return _split_spaced(segment)


def _split_spaced(segment: str) -> list[str]:
    sentences: list[str] = []
    start = 0
    for match in _BOUNDARY.finditer(segment):
        end = match.end()
        rest = segment[end:]
        if not rest or not _starts_sentence(rest):
            continue
        if match.group(1) == "." and _is_abbreviation(segment[start : match.start()], rest):
            continue
        sentences.append(segment[start:end].strip())
        start = end
    tail = segment[start:].strip()
    if tail:
        sentences.append(tail)
    return sentences


def _starts_sentence(text: str) -> bool:
    """Whether `text` starts as a sentence does: a capital of any cased script (Latin,
    Cyrillic, Greek, Armenian: "Šťastný", "Это", "Αυτή"), a digit, or a letter of a script
    without case (Arabic, Hebrew, Devanagari, CJK), where nothing marks a start."""
    head = text[1:2] if text[:1] in _OPENERS else text[:1]
    if not head:
        return False
    return head.isdigit() or head.isupper() or head.istitle() or _uncased_letter(head)


def _uncased_letter(ch: str) -> bool:
    return ch.isalpha() and ch.lower() == ch.upper() == ch


def _is_abbreviation(before: str, rest: str) -> bool:
    words = before.split()
    if not words:
        return False
    word = words[-1].lstrip("([\"'“‘").lower()
    if word in _ABBREVIATIONS:
        return True
    if word in _BEFORE_NUMBER and rest[:1].isdigit():
        return True
    # Initials and dotted acronyms ("J. Smith", "U.S. Army"), but not a number that ends
    # a sentence ("... in 2023. The") nor a one-letter word like "a" or "I".
    return bool(_INITIALS.match(word)) and word not in ("a", "i")


def _split_long(sentence: str) -> list[str]:
    if word_count(sentence) <= _LONG_SENTENCE_WORDS:
        return [sentence]
    parts = [p.strip() for p in re.split(r"(?<=;)\s+", sentence)]
    return [p for p in parts if p]


# A sentence that asks (the question marks of Latin, CJK and Arabic script, before any
# closing quote or bracket). It states nothing: in a FAQ its answer is what follows it,
# and a written answer that repeats the question cites nothing with it.
_ASKS = re.compile(r"[?？؟][\"'”’)\]»]*$")


def asks(sentence: str) -> bool:
    return bool(_ASKS.search(sentence.rstrip()))
