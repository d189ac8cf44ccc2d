"""`ragdoll ask --file`: against a real engine, and in-process with a fake one for
what a real engine will not do on demand (fail one question, be interrupted)."""

from __future__ import annotations

import argparse
import csv
import os
import signal
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import pytest

import app.commands.ask as ask_command
from engine.wire import (
    AnswerDone,
    AnswerEvent,
    Citation,
    CitationsEvent,
    DoneEvent,
    FailedEvent,
    TokenEvent,
)
from tests.app.batch.conftest import QUESTIONS
from tests.support.engine import RunningEngine


def main(argv: Sequence[str]) -> int:
    """`ragdoll ARGV` in-process, with only `ask` registered: app.cli's parser also
    registers the benchmarks, whose import of torch takes seconds on a busy machine."""
    parser = argparse.ArgumentParser(prog="ragdoll")
    ask_command.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(argv)
    return int(args.func(args))


def _questions_file(folder: Path, lines: list[str]) -> Path:
    path = folder / "questions.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_a_file_of_questions_to_csv(batch_engine: RunningEngine, tmp_path: Path) -> None:
    questions = _questions_file(tmp_path, ["# three questions", "", *QUESTIONS])
    out = tmp_path / "answers.csv"
    result = batch_engine.ragdoll("ask", "--file", str(questions), "--out", str(out), "-k", "3")
    assert result.returncode == 0, result.stderr
    assert "[3/3]" in result.stderr and "3 answered" in result.stderr
    assert result.stdout == ""
    with out.open(encoding="utf-8-sig", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [r["question"] for r in rows] == QUESTIONS
    assert all(r["status"] == "answered" and r["mode"] == "extractive" for r in rows)
    bridge, cat, garden = rows
    assert "corrosion" in bridge["answer"]
    assert "bridge report.pdf — page 2" in bridge["sources"]
    assert "Biscuit" in cat["answer"] and "lighthouse.md" in cat["sources"]
    assert "4,200" in garden["answer"]


# -- in-process, with a fake engine --------------------------------------------------------

CITATION = Citation(
    index=1,
    chunk_id="c1",
    path="/docs/report.pdf",
    page=2,
    text="passage",
    score=1.0,
    char_start=0,
    char_end=7,
)


class FakeClient:
    """Answers at once, except "refused" (an error) and "slow" (waits on `release`)."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.priorities: list[str] = []

    def ask_stream(
        self,
        *,
        question: str,
        k: int = 5,
        priority: str = "interactive",
        history: object = (),
        cancel: object = None,
    ) -> Iterator[AnswerEvent]:
        self.priorities.append(priority)
        yield CitationsEvent(citations=[CITATION])
        if question == "refused":
            yield FailedEvent(message="the engine refused it")
            return
        if question == "slow":
            self.release.wait(10)
        yield TokenEvent(text=f"answer to {question}")
        yield DoneEvent(done=AnswerDone(answer=f"answer to {question}", mode="extractive"))


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeClient:
    client = FakeClient()

    @contextmanager
    def session(*, keep: bool = False, answers: bool = False) -> Iterator[FakeClient]:
        yield client

    monkeypatch.setattr(ask_command, "engine_session", session)
    return client


def test_a_failed_question_is_a_row_and_a_nonzero_exit(
    fake: FakeClient, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    questions = _questions_file(tmp_path, ["first", "refused", "last"])
    out = tmp_path / "answers.md"
    assert main(["ask", "--file", str(questions), "--out", str(out)]) == 1
    lines = out.read_text(encoding="utf-8").splitlines()
    assert "answer to first" in lines[2] and "answer to last" in lines[4]
    assert "**Failed:** the engine refused it" in lines[3]
    err = capsys.readouterr().err
    assert "FAILED: the engine refused it" in err and "2 answered, 1 failed" in err
    assert fake.priorities == ["background"] * 3


def test_without_out_the_markdown_table_goes_to_stdout(
    fake: FakeClient, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    questions = _questions_file(tmp_path, ["first?", "# skipped", "second | third?"])
    assert main(["ask", "--file", str(questions), "-k", "2"]) == 0
    out = capsys.readouterr()
    table = out.out.splitlines()
    assert table[0] == "| # | Question | Answer | Sources |"
    assert table[2] == "| 1 | first? | answer to first? | [1] report.pdf — page 2 |"
    assert table[3].startswith("| 2 | second \\| third? |")
    assert "[2/2]" in out.err and "2 answered" in out.err


def test_one_question_still_streams_with_its_sources(
    fake: FakeClient, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["ask", "what is it?"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("answer to what is it?\n")
    assert "Sources:\n  [1] report.pdf, page 2: passage" in out
    assert fake.priorities == ["interactive"]


class _MarkingClient(FakeClient):
    """A model's answer that cites nothing, marked by the engine once written."""

    def ask_stream(self, *, question: str, **_: object) -> Iterator[AnswerEvent]:
        yield CitationsEvent(citations=[CITATION])
        yield TokenEvent(text="The honey is stored ")
        yield TokenEvent(text="in the cellar.")
        done = AnswerDone(answer="The honey is stored in the cellar [1].", mode="generative")
        yield DoneEvent(done=done)


@pytest.mark.parametrize("terminal", [False, True], ids=["pipe", "terminal"])
def test_one_question_shows_the_markers_the_window_shows(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], terminal: bool
) -> None:
    """Issue #44, 8: the window shows the engine's final text, with the [n] it added;
    `ragdoll ask` printed only the tokens as the model wrote them."""
    client = _MarkingClient()

    @contextmanager
    def session(*, keep: bool = False, answers: bool = False) -> Iterator[FakeClient]:
        yield client

    monkeypatch.setattr(ask_command, "engine_session", session)
    monkeypatch.setattr(ask_command, "_terminal", lambda: terminal)
    assert main(["ask", "where is the honey?"]) == 0
    out = capsys.readouterr().out
    if terminal:  # streamed as written, then with the markers
        assert out.startswith(
            "The honey is stored in the cellar.\n\nWith its sources marked:\n"
            "The honey is stored in the cellar [1].\n"
        )
    else:  # a pipe or a file gets the final text once
        assert out.startswith("The honey is stored in the cellar [1].\n\nSources:")
        assert out.count("The honey") == 1


def test_ctrl_c_writes_what_was_answered(
    fake: FakeClient, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    questions = _questions_file(tmp_path, ["one", "slow", "two"])
    out = tmp_path / "answers.csv"
    two_done = threading.Event()
    progress = ask_command._progress

    def counting_progress(**kw: object) -> None:
        progress(**kw)  # type: ignore[arg-type]
        if kw["done"] == 2:
            two_done.set()

    monkeypatch.setattr(ask_command, "_progress", counting_progress)

    def interrupt() -> None:
        if two_done.wait(10):  # "one" and "two" are in; "slow" waits
            os.kill(os.getpid(), signal.SIGINT)

    threading.Thread(target=interrupt, daemon=True).start()
    try:
        code = main(["ask", "--file", str(questions), "--out", str(out), "--format", "csv"])
    finally:
        fake.release.set()
    assert code == 130
    with out.open(encoding="utf-8-sig", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [(r["question"], r["status"]) for r in rows] == [
        ("one", "answered"),
        ("slow", "cancelled"),
        ("two", "answered"),
    ]


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["ask", "--out", "x.csv", "why?"], "go with --file"),
        (["ask", "why?", "--file", "{q}"], "not both"),
        (["ask", "--file", "{q}", "--json"], "--json"),
        (["ask", "--file", "{q}", "--out", "{tmp}/no/such/folder/a.csv"], "does not exist"),
        (["ask", "--file", "{q}", "--out", "{tmp}/a.txt"], "--format"),
        (["ask", "--file", "{tmp}/missing.txt"], "does not exist"),
        (["ask", "--file", "{long}"], "line 2"),
        (["ask"], "--file"),
        (["ask", ""], "the question is empty"),
        (["ask", "  \t "], "the question is empty"),
        (["ask", "x" * 100_000], "100,000 characters long; questions may be at most 8,000"),
    ],
)
def test_bad_arguments_fail_before_any_question_is_sent(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    words: str,
) -> None:
    monkeypatch.setattr(ask_command, "engine_session", None)  # calling it would fail the test
    q = _questions_file(tmp_path, ["a question?"])
    long = tmp_path / "long.txt"
    long.write_text("fine?\n" + "x" * 8001 + "\n")
    args = [a.format(q=q, tmp=tmp_path, long=long) for a in argv]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert words in err
    assert err.count("\n") == 1 and len(err) < 300  # one line, never the question echoed


def test_the_question_limit_is_in_the_help() -> None:
    parser = argparse.ArgumentParser(prog="ragdoll")
    ask_command.register(sub := parser.add_subparsers(dest="command"))
    assert "at most 8,000 characters" in sub.choices["ask"].format_help()


def test_terminal_escapes_in_a_questions_file_are_made_harmless(
    batch_engine: RunningEngine, tmp_path: Path
) -> None:
    questions = _questions_file(
        tmp_path, ["\x1b[2J\x1b]0;pwned\x07What is the name of the lighthouse keeper's cat?\x08"]
    )
    out = tmp_path / "answers.csv"
    for extra in (["--out", str(out)], ["--format", "csv"]):
        result = batch_engine.ragdoll("ask", "--file", str(questions), *extra)
        assert result.returncode == 0, result.stderr
        for text in (result.stdout, result.stderr, out.read_text(encoding="utf-8-sig")):
            assert not any(ch in text for ch in "\x1b\x07\x08"), text
    with out.open(encoding="utf-8-sig", newline="") as f:
        (row,) = list(csv.DictReader(f))
    assert row["question"].startswith("\\x1b[2J\\x1b]0;pwned\\x07What is")
    # The escapes are sent as their visible letters: words no document holds, which the
    # gate may hold against the question (refusal.py); answered or refused, it is shown.
    assert "Biscuit" in row["answer"] or "never mention" in row["answer"]
