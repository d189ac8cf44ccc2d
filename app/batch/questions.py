"""A list of questions from a text file or pasted text: one per line."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from app.batch.visible import visible

# The engine refuses longer questions (engine/service/server.py, the ask body's
# max_length); checking here says which line before any question is sent.
MAX_QUESTION_CHARS = 8000
# More than a person would paste; a file this big is most likely not a list of questions.
MAX_FILE_BYTES = 8 * 1024 * 1024


class QuestionsError(ValueError):
    """The list cannot be used as it is; the message names the lines at fault."""


@dataclass(frozen=True, kw_only=True)
class ListedQuestion:
    line: int  # 1-based line of the file or text it came from
    text: str


def parse_questions(*, text: str, source: str = "the list") -> tuple[ListedQuestion, ...]:
    """One question per line; blank lines and lines starting with `#` are skipped,
    duplicates are kept (the person may want both answers); control characters and
    terminal escapes are made visible (app/batch/visible.py), never sent raw. Every line that is too
    long is reported at once, so that one edit fixes the list."""
    questions: list[ListedQuestion] = []
    too_long: list[str] = []
    # Not str.splitlines(): it also splits at form feeds and U+2028, and the line
    # numbers would then disagree with the person's editor.
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    for number, raw in enumerate(lines, start=1):
        line = visible(raw.strip(), keep="\t")
        if not line or line.startswith("#"):
            continue
        if len(line) > MAX_QUESTION_CHARS:
            too_long.append(f"line {number} ({len(line)} characters)")
            continue
        questions.append(ListedQuestion(line=number, text=line))
    if too_long:
        raise QuestionsError(
            f"{source}: questions may be at most {MAX_QUESTION_CHARS} characters long; "
            f"too long: {', '.join(too_long)}"
        )
    if not questions:
        raise QuestionsError(
            f"{source} has no questions (one per line; blank lines and lines "
            "starting with # are skipped)"
        )
    return tuple(questions)


def has_questions(*, text: str) -> bool:
    """Whether `parse_questions` finds any line to ask (it may still refuse one
    as too long, which Run then says): cheap enough for every keystroke."""
    return any(
        (line := raw.strip()) and not line.startswith("#")
        for raw in text.replace("\r", "\n").split("\n")
    )


def read_questions(*, path: Path) -> tuple[ListedQuestion, ...]:
    """The questions of a UTF-8 text file (a byte-order mark is allowed)."""
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            raise QuestionsError(
                f"{path} is {size / 2**20:.1f} MiB; a list of questions is expected to be "
                f"under {MAX_FILE_BYTES // 2**20} MiB"
            )
        data = path.read_bytes()
    except IsADirectoryError:
        raise QuestionsError(f"{path} is a folder, not a text file of questions") from None
    except FileNotFoundError:
        raise QuestionsError(f"{path} does not exist") from None
    except OSError as e:
        raise QuestionsError(f"{path} cannot be read: {e.strerror or e}") from None
    if b"\x00" in data:
        raise QuestionsError(f"{path} is not a text file (it holds binary data)")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        raise QuestionsError(
            f"{path} is not UTF-8 text (line {line}); save it as UTF-8 and try again"
        ) from None
    return parse_questions(text=text, source=str(path))
