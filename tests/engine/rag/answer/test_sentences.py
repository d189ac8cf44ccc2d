"""Sentence splitting on the kind of text that PDF and Word extraction produces."""

from __future__ import annotations

import pytest

from engine.rag.answer.sentences import split_sentences, word_count


def test_plain_sentences_split_at_their_punctuation() -> None:
    text = "The pump is quiet. Is the valve open? Yes, the valve is open! It ran for hours…"
    assert split_sentences(text) == [
        "The pump is quiet.",
        "Is the valve open?",
        "Yes, the valve is open!",
        "It ran for hours…",
    ]


@pytest.mark.parametrize(
    "sentence",
    [
        "As shown in Fig. 3 the housing has two clips.",
        "The gap between the electrodes is 3.5 mm wide.",
        "Use a mild cleaner, e.g. soap, and dry it i.e. fully.",
        "Dr. Smith met J. R. Tolkien in the U.S. Army in 1917.",
        "The total was approx. 12 EUR per unit, see No. 5 and p. 12 there.",
        'She said "stop the pump." and then left the room.',
    ],
)
def test_abbreviations_initials_and_decimals_do_not_end_a_sentence(sentence: str) -> None:
    assert split_sentences(f"{sentence} The next sentence follows here.") == [
        sentence,
        "The next sentence follows here.",
    ]


def test_a_number_or_acronym_can_still_end_a_sentence() -> None:
    assert split_sentences("The plant opened in 2023. The next plant opens soon.") == [
        "The plant opened in 2023.",
        "The next plant opens soon.",
    ]


def test_wrapped_lines_are_joined_and_hyphenated_words_mended() -> None:
    text = (
        "The maintenance of the pump re-\n"
        "quires special tools, which the dealer\n"
        "London office sells. Nothing else is needed."
    )
    assert split_sentences(text) == [
        "The maintenance of the pump requires special tools, which the dealer London office sells.",
        "Nothing else is needed.",
    ]


def test_headings_list_items_and_table_rows_stand_alone() -> None:
    text = (
        "Safety notes for the battery pack\n"
        "Never charge the battery pack without supervision, and never leave it in a hot car.\n"
        "• Do not expose the battery to heat\n"
        "• Keep the device away from water\n"
        "1. Remove the cover with a screwdriver.\n"
        "2) Lift the filter out of its housing\n"
        "\n"
        "Region Sales Growth\n"
        "Europe 120 units 12 %"
    )
    assert split_sentences(text) == [
        "Safety notes for the battery pack",
        "Never charge the battery pack without supervision, and never leave it in a hot car.",
        "Do not expose the battery to heat",
        "Keep the device away from water",
        "Remove the cover with a screwdriver.",
        "Lift the filter out of its housing",
        "Europe 120 units 12 %",
    ]


def test_fragments_are_dropped_and_long_runs_split_at_semicolons() -> None:
    assert split_sentences("Chapter 3. See above. Figure 2") == []
    assert split_sentences("Too short.", min_words=2) == ["Too short."]
    run = "; ".join(f"item {i} is a part of the list" for i in range(12))
    parts = split_sentences(run)
    assert len(parts) == 12
    assert parts[0] == "item 0 is a part of the list;"


def test_odd_whitespace_and_soft_hyphens_are_normalised() -> None:
    text = "The\u00a0filter   needs\tmain\u00adtenance monthly.\r\nThe pump is quiet."
    assert split_sentences(text) == ["The filter needs maintenance monthly.", "The pump is quiet."]


def test_a_definition_lists_term_is_not_run_into_the_sentence_above_it() -> None:
    """A manual's term lines ("/dev/tcp/host/port") start without a capital: read
    as a continuation, the term of the next entry ended the previous description."""
    text = (
        "/dev/stderr\n"
        "File descriptor 2 is duplicated.\n"
        "/dev/tcp/host/port\n"
        "If host is a valid hostname and port is a port number, Bash opens a TCP socket.\n"
    )
    assert split_sentences(text, min_words=1) == [
        "/dev/stderr",
        "File descriptor 2 is duplicated.",
        "/dev/tcp/host/port",
        "If host is a valid hostname and port is a port number, Bash opens a TCP socket.",
    ]


def test_code_lines_in_a_row_stay_with_the_sentence_they_follow() -> None:
    text = (
        "Then this bit loads the letter class with the a4paper option.\n"
        "\\ProcessOptions\\relax\n"
        "\\LoadClass[a4paper]{letter}\n"
        "In order to use the letter head, it redefines the page style."
    )
    assert split_sentences(text, min_words=1) == [
        "Then this bit loads the letter class with the a4paper option. "
        "\\ProcessOptions\\relax \\LoadClass[a4paper]{letter}",
        "In order to use the letter head, it redefines the page style.",
    ]


def test_a_footnote_is_read_alone_not_run_into_the_line_above_it() -> None:
    # As PDFium reads a typeset page: the footnote's mark opens its line, whatever
    # stood above it (a code listing's line, a contents entry) ends without punctuation.
    text = (
        "12 \\def\\syntaxonly{%\n"
        "∗This file has version number v2.1e, dated 2017/06/30.\n"
        "4.6 Delaying code 20\n"
        "†Walter wrote fix-cm, the rest is the team's.\n"
        "See the table below\n"
        "‡ another footnote, marked apart."
    )
    assert split_sentences(text, min_words=1) == [
        "12 \\def\\syntaxonly{%",
        "∗This file has version number v2.1e, dated 2017/06/30.",
        "4.6 Delaying code 20",
        "†Walter wrote fix-cm, the rest is the team's.",
        "See the table below",
        "‡ another footnote, marked apart.",
    ]
    # A section sign or an asterisk starting a wrapped line is no footnote.
    assert split_sentences("The terms are set out in\n§ 4 of the agreement.") == [
        "The terms are set out in § 4 of the agreement."
    ]


def test_lines_that_start_with_the_same_word_are_rows_read_alone() -> None:
    text = (
        "The colour is given in one of these forms:\n"
        'rgbcolor "0xRRGGBB" # string containing hexadecimal constant\n'
        'rgbcolor "#RRGGBB" # string containing hexadecimal in x11 format\n'
        "rgbcolor variable # integer value is read from input file"
    )
    assert split_sentences(text, min_words=1) == [
        'The colour is given in one of these forms: rgbcolor "0xRRGGBB" # string containing '
        "hexadecimal constant",
        'rgbcolor "#RRGGBB" # string containing hexadecimal in x11 format',
        "rgbcolor variable # integer value is read from input file",
    ]
    # Wrapped prose whose lines start with the same function word runs on.
    prose = "The palette is described in\nthe next section, after\nthe colour map."
    assert split_sentences(prose) == [
        "The palette is described in the next section, after the colour map."
    ]


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("Это первое предложение о пакетах.", "Второе говорит совсем о другом."),
        ("Αυτή είναι η πρώτη πρόταση εδώ.", "Δεύτερη πρόταση είναι αυτή εδώ."),
        ("Šťastný je první věta tady.", "Žluťoučký kůň je druhá věta."),
        ("Łódź leży w centrum kraju.", "Ślązacy mieszkają na południu kraju."),
        ("Instale el paquete con apt primero.", "¿Cómo se actualiza la lista de paquetes?"),
    ],
)
def test_a_capital_of_any_cased_script_starts_a_sentence(first: str, second: str) -> None:
    # A capital outside Latin-1 (Cyrillic, Greek, Czech and Polish letters) or a
    # Spanish inverted mark used to run two sentences into one.
    assert split_sentences(f"{first} {second}") == [first, second]


def test_chinese_and_japanese_sentences_end_at_their_full_width_stops() -> None:
    first, second = (
        "要安装一个软件包，请以 root 身份运行 apt install 加上名字。",
        "更新软件包列表用 apt update 命令。",
    )
    chinese = first + second
    assert split_sentences(chinese) == [first, second]
    japanese = (
        "パッケージをインストールするには実行します。一覧を更新するには別のコマンドを使います！"
    )
    assert split_sentences(japanese) == [
        "パッケージをインストールするには実行します。",
        "一覧を更新するには別のコマンドを使います！",
    ]


def test_a_run_of_an_unspaced_script_counts_as_many_words() -> None:
    assert word_count("the pump is quiet") == 4
    assert word_count("软件包管理工具") == 4  # seven characters, about two per word
    assert word_count("Debian 使用 APT") == 3
    # A short Chinese sentence is kept, as a short English one would be dropped.
    assert split_sentences("更新软件包列表。") == ["更新软件包列表。"]
    assert split_sentences("更新。") == []


def test_a_word_broken_across_lines_is_joined_in_any_script() -> None:
    text = "Это слово нужно пере-\nнести на новую строку. Das ist eine Über-\nprüfung hier."
    assert split_sentences(text) == [
        "Это слово нужно перенести на новую строку.",
        "Das ist eine Überprüfung hier.",
    ]


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("यह पहला वाक्य है जो लंबा है।", "यह दूसरा वाक्य है जो भी लंबा है।"),
        ("ما هو هذا الكتاب الجديد هنا؟", "هذا كتاب جديد عن البرمجة."),
    ],
)
def test_devanagari_and_arabic_stops_end_a_sentence(first: str, second: str) -> None:
    assert split_sentences(f"{first} {second}") == [first, second]
