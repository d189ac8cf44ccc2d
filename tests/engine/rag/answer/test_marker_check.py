"""Markers of a written answer checked against their passages, with the real bundled
embedder, on answers shaped like the real Qwen2.5-Coder-1.5B's (issue #40)."""

from __future__ import annotations

import numpy as np
import pytest

from engine.rag.answer.marker_check import check_markers, find_claims
from engine.rag.ingest.embedder import Embedder

SET_PAGE = (  # laid out as the manual's page is
    "The set builtin changes the values of shell options.\n"
    "-e Exit immediately if a pipeline, which may consist of a single simple command,\n"
    "returns a non-zero status.\n"
    "-x Print a trace of simple commands before they are executed."
)
SHOPT_PAGE = (
    "The shopt builtin toggles the values of settings controlling optional shell "
    "behavior. autocd: a command name that is the name of a directory is executed as if "
    "it were the argument to the cd command. cdspell: minor errors in the spelling of a "
    "directory component in a cd command are corrected."
)
JOBS_PAGE = (
    "Job control refers to the ability to selectively stop (suspend) the execution of "
    "processes and continue (resume) their execution at a later point. When Bash starts "
    "a job asynchronously, it prints a line that looks like: [1] 25647 indicating that "
    "this job is job number 1."
)


@pytest.fixture(scope="module")
def embed():  # type: ignore[no-untyped-def]
    model = Embedder()
    return lambda texts: np.asarray(model.embed(texts))


def test_a_marker_on_the_wrong_page_moves_to_the_page_that_holds_the_claim(embed) -> None:  # type: ignore[no-untyped-def]
    answer = "Use set -e to make the script exit immediately when a command fails [2]."
    got = check_markers(answer=answer, passages=[SET_PAGE, SHOPT_PAGE], embed=embed)
    assert got.text == "Use set -e to make the script exit immediately when a command fails [1]."
    assert (got.moved, got.kept, got.dropped, got.bare) == (1, 0, 0, False)


def test_a_right_marker_stays_and_a_claim_no_page_holds_loses_its_marker(embed) -> None:  # type: ignore[no-untyped-def]
    answer = (
        "The -e option exits immediately when a pipeline returns a non-zero status [1]. "
        "Bash was written by Brian Fox for the GNU Project in 1989 [1][2], and more.\n"
        "Source: [2]"
    )
    got = check_markers(answer=answer, passages=[SET_PAGE, SHOPT_PAGE], embed=embed)
    assert got.text == (
        "The -e option exits immediately when a pipeline returns a non-zero status [1]. "
        "Bash was written by Brian Fox for the GNU Project in 1989, and more.\n"
        "Source:"
    )
    assert got.kept == 1 and got.dropped == 3


@pytest.mark.parametrize("answer", ["[2]", "[1], [2], …, [3]", "Yes, [2]", "[1][3]."])
def test_an_answer_of_markers_alone_is_bare(embed, answer: str) -> None:  # type: ignore[no-untyped-def]
    got = check_markers(answer=answer, passages=[SET_PAGE, SHOPT_PAGE, JOBS_PAGE], embed=embed)
    assert got.bare
    assert "[" not in got.text  # nothing short enough to compare keeps a marker


def test_a_page_s_own_bracketed_number_is_not_a_marker(embed) -> None:  # type: ignore[no-untyped-def]
    answer = (
        "When Bash starts a job asynchronously, it prints a line that looks like: "
        "[1] 25647 indicating that this job is job number 1."
    )
    got = check_markers(answer=answer, passages=[SHOPT_PAGE, JOBS_PAGE], embed=embed)
    assert got.text == answer


def test_markers_out_of_range_go_and_text_without_markers_is_unchanged(embed) -> None:  # type: ignore[no-untyped-def]
    plain = "The -e option exits when a pipeline fails."
    assert check_markers(answer=plain, passages=[SET_PAGE], embed=embed).text == plain
    got = check_markers(
        answer="The -e option exits when a pipeline returns a non-zero status [7].",
        passages=[SET_PAGE],
        embed=embed,
    )
    assert got.text == "The -e option exits when a pipeline returns a non-zero status [1]."


def test_claims_run_from_the_sentence_start_or_the_previous_marker() -> None:
    claims = find_claims("First thing [1] and second thing [2]. Third one. [3]\n- item [1-2]")
    assert [(c.cited, c.text) for c in claims] == [
        ((1,), "First thing"),
        ((2,), "and second thing"),
        ((3,), "Third one."),
        ((1, 2), "item"),
    ]


def test_a_marker_after_a_paragraph_goes_to_the_sentence_its_passage_holds(embed) -> None:  # type: ignore[no-untyped-def]
    """The real 1.5B: the fact first, its own elaboration last, the marker after both."""
    passages = [
        "The first step of the Autotools workflow is usually that upstream runs "
        "autoreconf -i -f in the source directory and distributes the generated files.",
        "Building the package needs a clean chroot with the build dependencies installed.",
    ]
    answer = (
        "Upstream usually runs autoreconf -i -f in the source directory and distributes the "
        "generated files. This step is crucial for a healthy life and happy pets. [1]"
    )
    got = check_markers(answer=answer, passages=passages, embed=embed)
    assert got.text == (
        "Upstream usually runs autoreconf -i -f in the source directory and distributes the "
        "generated files [1]. This step is crucial for a healthy life and happy pets."
    )
    assert got.moved == 1


def test_a_sentence_already_shown_vouches_for_the_marker_after_it(embed) -> None:  # type: ignore[no-untyped-def]
    """Checked as it is written, the fact's sentence is shown before the marker comes:
    it cannot take the marker, which stays where the model put it."""
    passages = [
        "The first step of the Autotools workflow is usually that upstream runs "
        "autoreconf -i -f in the source directory and distributes the generated files.",
        "Building the package needs a clean chroot with the build dependencies installed.",
    ]
    shown = (
        "Upstream usually runs autoreconf -i -f in the source directory and distributes the "
        "generated files. "
    )
    later = "This step is crucial for a healthy life and happy pets. [1]"
    got = check_markers(answer=later, passages=passages, embed=embed, before=shown)
    assert got.text == later and got.kept == 1
    # A line break between them, or nothing shown: no sentence vouches for it.
    for before in (shown + "\n", ""):
        alone = check_markers(answer=later, passages=passages, embed=embed, before=before)
        assert "[" not in alone.text and alone.dropped == 1
    # A question after it cites nothing, vouched for or not (the real 1.5B wrote a
    # question back, its marker after the question mark).
    asked = "Does upstream have to run it again for every release? [1]"
    got = check_markers(answer=asked, passages=passages, embed=embed, before=shown)
    assert got.text == asked.removesuffix(" [1]") and got.dropped == 1 and got.kept == 0


@pytest.mark.parametrize(
    "answer",
    [
        "Use `${arr[1]}` to read the second element of the array.",
        "Read the second element with ${arr[1]} in bash.",
        "The list x[2] holds the third value of the example.",
    ],
)
def test_an_index_in_code_is_not_a_marker(embed, answer: str) -> None:  # type: ignore[no-untyped-def]
    got = check_markers(answer=answer, passages=[SET_PAGE, SHOPT_PAGE, JOBS_PAGE], embed=embed)
    assert got.text == answer and got.kept + got.moved + got.dropped == 0


def test_a_chinese_answer_s_claims_end_at_full_width_stops(embed) -> None:  # type: ignore[no-untyped-def]
    claims = find_claims("Asymptote 是编译执行的 [1]。它先生成虚拟机代码 [2]。")
    assert [(c.cited, c.text) for c in claims] == [
        ((1,), "Asymptote 是编译执行的"),
        ((2,), "它先生成虚拟机代码"),
    ]
    # Ten characters are about five words: a short Chinese answer is not bare (it was
    # two "words", so the quote replaced it).
    got = check_markers(answer="Asymptote 是解释执行的。", passages=[SET_PAGE], embed=embed)
    assert not got.bare


@pytest.mark.parametrize(
    "answer",
    [
        "Which builtin changes the values of shell options? [1]",
        "Which builtin changes the values of shell options [1]?",
    ],
)
def test_a_sentence_that_asks_cites_nothing(embed, answer: str) -> None:  # type: ignore[no-untyped-def]
    # A small model often repeats the question; the page holds its words, not an answer.
    got = check_markers(answer=answer, passages=[SET_PAGE, SHOPT_PAGE], embed=embed)
    assert "[" not in got.text and got.kept == 0 and got.dropped == 1


def test_a_marker_the_statement_loses_does_not_go_back_to_the_question(embed) -> None:  # type: ignore[no-untyped-def]
    answer = (
        "Which builtin changes the values of shell options? "
        "Bash was written by Brian Fox for the GNU Project in 1989 [1]."
    )
    got = check_markers(answer=answer, passages=[SET_PAGE, SHOPT_PAGE], embed=embed)
    assert "[" not in got.text and got.moved == 0
