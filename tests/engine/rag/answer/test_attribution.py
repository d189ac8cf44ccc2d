"""Source markers for a written answer that cites nothing, matched with the real
bundled embedder on known passages."""

from __future__ import annotations

import numpy as np
import pytest

from engine.rag.answer.attribution import attribute_sources, cites_any
from engine.rag.ingest.embedder import Embedder

PASSAGES = [
    "The hives are inspected every Saturday morning. The honey is extracted in late "
    "August and stored in the cellar.",
    "Swarms leave the hive in May. A swarm is caught in an empty box placed near the apiary.",
]


@pytest.fixture(scope="module")
def embed():  # type: ignore[no-untyped-def]
    model = Embedder()
    return lambda texts: np.asarray(model.embed(texts))


def test_each_restating_sentence_gets_its_passages_marker(embed) -> None:  # type: ignore[no-untyped-def]
    answer = (
        "The honey is taken out of the hives at the end of August, then kept in the cellar. "
        "Swarms usually leave in May, and you can catch one in an empty box!\n"
        "I like turtles very much indeed, they are great."
    )
    got = attribute_sources(answer=answer, passages=PASSAGES, embed=embed)
    assert got.markers_added == 2
    assert got.text == (
        "The honey is taken out of the hives at the end of August, then kept in the cellar [1]. "
        "Swarms usually leave in May, and you can catch one in an empty box [2]!\n"
        "I like turtles very much indeed, they are great."
    )


def test_code_headings_and_short_lines_stay_as_written(embed) -> None:  # type: ignore[no-untyped-def]
    answer = (
        "## The honey is extracted in late August and stored in the cellar\n\n"
        "```sh\nThe honey is extracted in late August and stored in the cellar.\n```\n"
        "- August\n"
        "- The honey is extracted in late August and stored in the cellar"
    )
    got = attribute_sources(answer=answer, passages=PASSAGES, embed=embed)
    # Only the list item's sentence (no closing punctuation: the marker goes at its end).
    assert got.markers_added == 1
    assert got.text == answer + " [1]"


def test_an_answer_that_cites_a_passage_is_left_alone(embed) -> None:  # type: ignore[no-untyped-def]
    cited = "Swarms leave the hive in May [2]. The honey is extracted in late August."
    assert attribute_sources(answer=cited, passages=PASSAGES, embed=embed).text == cited
    assert cites_any("see [1, 2]", count=2) and not cites_any("see [3]", count=2)
    # A marker past the sources given cites nothing: matched as if there were none.
    wrong = "The honey is extracted in late August and stored in the cellar [7]."
    got = attribute_sources(answer=wrong, passages=PASSAGES, embed=embed)
    assert got.text == "The honey is extracted in late August and stored in the cellar [7] [1]."


def test_nothing_to_match_changes_nothing(embed) -> None:  # type: ignore[no-untyped-def]
    answer = "The honey is extracted in late August."
    assert attribute_sources(answer=answer, passages=[], embed=embed).text == answer
    assert attribute_sources(answer="", passages=PASSAGES, embed=embed).text == ""


def test_a_line_that_introduces_a_list_is_marked_before_its_colon(embed) -> None:  # type: ignore[no-untyped-def]
    answer = "The honey is extracted in late August and stored in the cellar:\n- in jars"
    got = attribute_sources(answer=answer, passages=PASSAGES, embed=embed)
    assert (
        got.text == "The honey is extracted in late August and stored in the cellar [1]:\n- in jars"
    )


def test_punctuation_that_is_a_word_stays_before_the_marker(embed) -> None:  # type: ignore[no-untyped-def]
    """Issue #44, 8: "the result is inverted with [3]!." — bash's "!" is the sentence's
    last word, not its end."""
    passages = ["A pipeline's exit status is inverted when the pipeline is preceded by !."]
    answer = "The exit status of a pipeline is inverted when you precede it with !."
    got = attribute_sources(answer=answer, passages=passages, embed=embed)
    assert got.text == "The exit status of a pipeline is inverted when you precede it with ! [1]."
    shouted = "The exit status of a pipeline is inverted when preceded by an exclamation?!"
    got = attribute_sources(answer=shouted, passages=passages, embed=embed)
    assert got.text.endswith("by an exclamation [1]?!")


def test_fill_marks_only_the_sentences_without_a_marker(embed) -> None:  # type: ignore[no-untyped-def]
    answer = (
        "Swarms leave the hive in May [2]. "
        "The honey is extracted in late August and stored in the cellar. "
        "Swarms are caught in an empty box near the apiary. [2]"
    )
    assert attribute_sources(answer=answer, passages=PASSAGES, embed=embed).text == answer
    got = attribute_sources(answer=answer, passages=PASSAGES, embed=embed, fill=True)
    assert got.markers_added == 1
    assert got.text == answer.replace("the cellar.", "the cellar [1].")


def test_a_chinese_sentence_takes_its_marker_before_its_full_width_stop() -> None:
    def alike(texts: list[str]) -> np.ndarray:  # every text restates every passage
        return np.ones((len(texts), 4), dtype=np.float32) / 2.0

    answer = "Asymptote 先把源代码编译成虚拟机代码。然后由虚拟机解释执行这些代码。"
    passage = "Asymptote 把源代码编译成虚拟机代码，然后由虚拟机解释执行。"
    got = attribute_sources(answer=answer, passages=[passage], embed=alike)
    assert (
        got.text == "Asymptote 先把源代码编译成虚拟机代码 [1]。然后由虚拟机解释执行这些代码 [1]。"
    )


def test_a_sentence_that_asks_gets_no_marker(embed) -> None:  # type: ignore[no-untyped-def]
    answer = (
        "Is the honey extracted in late August and stored in the cellar? "
        "The honey is taken out of the hives at the end of August, then kept in the cellar."
    )
    got = attribute_sources(answer=answer, passages=PASSAGES, embed=embed)
    assert got.text == answer[:-1] + " [1]."
    assert got.markers_added == 1


def test_an_index_in_code_cites_nothing() -> None:
    assert cites_any("See the manual [1].", count=3)
    assert not cites_any("Read it with `${arr[1]}` or ${arr[2]} in bash.", count=3)
