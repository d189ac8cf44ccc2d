from __future__ import annotations

from pathlib import Path

import pytest

from app.batch.questions import (
    MAX_QUESTION_CHARS,
    ListedQuestion,
    QuestionsError,
    has_questions,
    parse_questions,
    read_questions,
)


def test_one_per_line_comments_and_blanks_skipped_duplicates_kept() -> None:
    text = "# my questions\n\nWhat is A?\r\n  What is B?  \n\n# skipped\nWhat is A?\rLast one"
    assert parse_questions(text=text) == (
        ListedQuestion(line=3, text="What is A?"),
        ListedQuestion(line=4, text="What is B?"),
        ListedQuestion(line=7, text="What is A?"),
        ListedQuestion(line=8, text="Last one"),
    )


def test_line_numbers_follow_newlines_only() -> None:
    # A form feed or U+2028 inside a line must not shift the numbers of later lines.
    (first, second) = parse_questions(text="Page\x0cbreak?\nSecond?")
    assert first.line == 1 and second.line == 2


def test_every_line_too_long_is_named() -> None:
    long = "x" * (MAX_QUESTION_CHARS + 1)
    ok = "y" * MAX_QUESTION_CHARS
    with pytest.raises(QuestionsError) as e:
        parse_questions(text=f"fine?\n{long}\n{ok}\n{long}", source="q.txt")
    message = str(e.value)
    assert "q.txt" in message and "line 2" in message and "line 4" in message
    assert "line 3" not in message


def test_the_limit_is_the_servers() -> None:
    from engine.service.api.bodies import AskBody

    (limit,) = [
        m.max_length for m in AskBody.model_fields["question"].metadata if hasattr(m, "max_length")
    ]
    assert limit == MAX_QUESTION_CHARS


@pytest.mark.parametrize("text", ["", "\n\n  \n", "# only\n# comments\n"])
def test_a_list_without_questions_is_refused(text: str) -> None:
    with pytest.raises(QuestionsError, match="no questions"):
        parse_questions(text=text)
    assert not has_questions(text=text)  # the dialog's Run stays disabled


@pytest.mark.parametrize("text", ["Why?", "# c\r\n  How?  \n", "x" * (MAX_QUESTION_CHARS + 1)])
def test_a_list_with_a_line_to_ask_enables_run(text: str) -> None:
    # A line too long still counts: Run then names it.
    assert has_questions(text=text)


def test_reads_utf8_with_or_without_bom(tmp_path: Path) -> None:
    plain = tmp_path / "plain.txt"
    plain.write_text("Où est la gare ?\n", encoding="utf-8")
    bom = tmp_path / "bom.txt"
    bom.write_bytes("\ufeffWas kostet das?\n".encode())
    assert read_questions(path=plain)[0].text == "Où est la gare ?"
    assert read_questions(path=bom)[0].text == "Was kostet das?"


def test_binary_latin1_missing_and_folder_are_clear_errors(tmp_path: Path) -> None:
    binary = tmp_path / "doc.pdf"
    binary.write_bytes(b"%PDF-1.4\x00\x01\x02")
    latin1 = tmp_path / "latin1.txt"
    latin1.write_bytes("first?\nCaf\u00e9?\n".encode("latin-1"))
    cases = {
        binary: "binary",
        latin1: "not UTF-8 text (line 2)",
        tmp_path / "missing.txt": "does not exist",
        tmp_path: "is a folder",
    }
    for path, words in cases.items():
        with pytest.raises(QuestionsError, match=words.replace("(", r"\(").replace(")", r"\)")):
            read_questions(path=path)
