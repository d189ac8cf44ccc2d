from __future__ import annotations

import codecs

import pytest

from engine.rag.ingest.text_cleanup import (
    BinaryContentError,
    clean_pdf_pages,
    decode_text_bytes,
    join_hyphenated_breaks,
    normalize_plain_text,
    strip_running_lines,
)


def _page(number: int, body: str, *, chapter: str = "Chapter 2: Setup") -> str:
    return f"Acme Router X2 User Guide\n{body}\n{chapter} {number}"


def test_hyphenated_line_break_is_joined_and_punctuation_follows() -> None:
    text = "the inter-\nnational standard. It was\nre-\nviewed, then it ended."
    assert join_hyphenated_breaks(text=text) == (
        "the international\nstandard. It was\nreviewed,\nthen it ended."
    )


def test_a_break_continued_in_lower_case_is_joined_in_any_script() -> None:
    # Only a-z continued a word before: "пере-\nнести" and "Straßen-\nübergang" kept
    # their line-end hyphen and were two words no question holds.
    text = "Можно пере-\nнести слово. Straßen-\nübergang hier."
    assert join_hyphenated_breaks(text=text) == ("Можно перенести\nслово. Straßenübergang\nhier.")


def test_capitalised_continuation_and_known_compounds_keep_their_hyphen() -> None:
    assert join_hyphenated_breaks(text="Anglo-\nSaxon") == "Anglo-\nSaxon"
    assert join_hyphenated_breaks(text="Санкт-\nПетербург") == "Санкт-\nПетербург"
    joined = join_hyphenated_breaks(
        text="a well-\nknown fact", keep_hyphen=frozenset({"well-known"})
    )
    assert joined == "a well-known\nfact"


def test_clean_pdf_pages_uses_the_documents_own_compounds() -> None:
    pages = ["A self-contained unit.\nThe self-\ncontained design helps. Con-\nnect it."]
    cleaned = " ".join(clean_pdf_pages(pages=pages)[0].split())
    assert "The self-contained design helps. Connect it." in cleaned


def test_ligatures_and_invisible_characters_are_fixed() -> None:
    cleaned = clean_pdf_pages(pages=["The ﬁrst ﬂow of the oﬃce\u00ad, x\u00a0\u00a0y ²"])[0]
    assert cleaned == "The first flow of the office, x y ²"  # ² is not a ligature: kept


@pytest.mark.parametrize(
    ("drawn", "written"),
    [
        # groff's bash manual page: the tilde and caret of paths and code
        ("reads ˜/.bashrc if the shell", "reads ~/.bashrc if the shell"),
        ("${parameterˆˆpattern}", "${parameter^^pattern}"),
        # TeX: a spacing accent before its letter; "it´s" is not an accent
        (
            "Lars Hecking, P´eter Juh´asz, Moir´e patterns",
            "Lars Hecking, Péter Juhász, Moiré patterns",
        ),
        ("it´s", "it´s"),
        # a backtick drawn as a combining grave over a space; a real accent stays
        ("For ls(1) in a \u0300chroot", "For ls(1) in a `chroot"),
        ("cafe\u0300", "caf\u00e8"),
        # gnuplot's list bullets are C1 control characters; elsewhere one is dropped
        ("Changes:\n\x88 All evaluation\nmid\x85dle", "Changes:\n• All evaluation\nmiddle"),
        # Sphinx's wrapped code lines, at a space and within one
        ("Finnish (fi),␣\n˓→French (fr)", "Finnish (fi), French (fr)"),
        ("armel, armhf,\n˓→ i386, mips", "armel, armhf, i386, mips"),
        ("Finnish (fi),␣\r\n˓→French (fr)", "Finnish (fi), French (fr)"),  # as PDFium ends lines
        ("inserts d␣␣b", "inserts d␣␣b"),
    ],
)
def test_pdf_glyphs_are_read_as_written(drawn: str, written: str) -> None:
    assert clean_pdf_pages(pages=[drawn])[0] == written


def test_plain_text_keeps_its_modifier_letters() -> None:
    # Only PDF fonts draw "~" as "˜"; in a text file it was typed.
    assert normalize_plain_text(text="Espa˜na ˆ") == "Espa˜na ˆ"


def test_whitespace_is_normalised_but_paragraph_breaks_stay() -> None:
    cleaned = clean_pdf_pages(pages=["  One   line\t here  \n\n\n\nNext  paragraph \n"])[0]
    assert cleaned == "One line here\n\nNext paragraph"


def test_dot_leaders_collapse() -> None:
    cleaned = clean_pdf_pages(pages=["Installation . . . . . . . . . 12"])[0]
    assert cleaned == "Installation … 12"


def test_running_header_footer_and_page_numbers_are_removed() -> None:
    pages = [_page(n, f"Body text number {n} about routers.") for n in range(1, 7)]
    cleaned = strip_running_lines(pages=pages)
    for n, text in enumerate(cleaned[1:], start=2):
        assert text == f"Body text number {n} about routers."
    # The first page keeps its header (usually the title) but not its footer.
    assert cleaned[0] == "Acme Router X2 User Guide\nBody text number 1 about routers."


def test_chapter_headers_that_change_every_few_pages_are_found() -> None:
    pages = [
        _page(n, f"Body {n}.", chapter="Chapter 1: Intro" if n <= 4 else "Chapter 2: Use")
        for n in range(1, 9)
    ]
    for text in strip_running_lines(pages=pages)[1:]:
        assert "Chapter" not in text


def test_alternating_left_right_headers_are_found() -> None:
    pages = [
        f"{'Acme Guide' if n % 2 else 'Section Setup'}\nContent {n}.\n- {n} -" for n in range(1, 9)
    ]
    assert strip_running_lines(pages=pages)[1:] == [f"Content {n}." for n in range(2, 9)]


def test_content_lines_that_do_not_repeat_are_kept() -> None:
    # Lines at the edges that differ only by a number inside them are content.
    pages = [
        f"Step {n} of the setup.\nOnly here {chr(65 + n)}.\nSee table {n} below." for n in range(5)
    ]
    assert strip_running_lines(pages=pages) == pages


def test_short_documents_are_left_alone() -> None:
    pages = ["Title\nText one.\n1", "Title\nText two.\n2"]
    assert strip_running_lines(pages=pages) == pages


@pytest.mark.parametrize(
    ("data", "expected", "encoding"),
    [
        (codecs.BOM_UTF8 + "café".encode(), "café", "utf-8"),
        (codecs.BOM_UTF16_LE + "naïve text".encode("utf-16-le"), "naïve text", "utf-16-le"),
        (codecs.BOM_UTF16_BE + "naïve text".encode("utf-16-be"), "naïve text", "utf-16-be"),
        ("plain notes, no BOM".encode("utf-16-le"), "plain notes, no BOM", "utf-16-le"),
        ("Grüße – “quoted”".encode("cp1252"), "Grüße – “quoted”", "cp1252"),
        ("Grüße – “quoted”".encode(), "Grüße – “quoted”", "utf-8"),
    ],
)
def test_decode_text_bytes(data: bytes, expected: str, encoding: str) -> None:
    decoded = decode_text_bytes(data=data)
    assert (decoded.text, decoded.encoding) == (expected, encoding)


@pytest.mark.parametrize(
    "data",
    [
        b"text with a \x00 NUL byte",
        bytes(range(256)) * 8,
        b"%PDF-1.7\n1 0 obj << >> endobj",
        b"\x89PNG\r\n\x1a\n....",
    ],
)
def test_binary_content_is_refused(data: bytes) -> None:
    with pytest.raises(BinaryContentError):
        decode_text_bytes(data=data)


def test_normalize_plain_text_keeps_lines_and_drops_noise() -> None:
    text = "Line one   \r\nLine two\r\n\r\n\r\n\r\nLast\u200b line\n\n"
    assert normalize_plain_text(text=text) == "Line one\nLine two\n\nLast line"
