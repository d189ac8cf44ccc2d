"""The prompt with a conversation: earlier turns before this turn's sources, a
stable start across turns (what the prefix cache reuses), and a long conversation
cut (oldest turns first), never refused."""

from __future__ import annotations

import itertools

import pytest
from transformers import AutoTokenizer

from engine.rag.answer.passages import Passage
from engine.rag.answer.prompt import build_prompt, count_prompt_tokens
from engine.runtime.models.synthetic import write_random_model
from engine.wire import Citation, Turn


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    folder = write_random_model(folder=tmp_path_factory.mktemp("m") / "llama", hidden_size=32)
    return AutoTokenizer.from_pretrained(folder, local_files_only=True)


def _passages(tag: str, n: int = 3) -> list[Passage]:
    return [
        Passage(
            index=i + 1, text=f"{tag} fact {i}: the pump runs at {i} bar.", path="m.pdf", page=i
        )
        for i in range(n)
    ]


def _turn(question: str, passages: list[Passage], answer: str) -> Turn:
    cites = [
        Citation(
            index=p.index, chunk_id=f"c{p.index}", path=p.path, page=p.page, text=p.text,
            score=0.5, char_start=0, char_end=len(p.text),
        )
        for p in passages
    ]  # fmt: skip
    return Turn(question=question, answer=answer, citations=cites)


def test_each_turns_prompt_starts_with_the_last_turns_prompt_and_answer(tokenizer) -> None:  # type: ignore[no-untyped-def]
    budget = 4000
    p1, p2, p3 = _passages("one"), _passages("two"), _passages("three")
    prompt1 = build_prompt(
        tokenizer=tokenizer, question="How fast is the pump?", passages=p1, max_prompt_tokens=budget
    )
    t1 = _turn("How fast is the pump?", p1, "It runs at 2 bar [3].")
    prompt2 = build_prompt(
        tokenizer=tokenizer,
        question="And the valve?",
        passages=p2,
        max_prompt_tokens=budget,
        history=[t1],
    )
    assert prompt2.startswith(prompt1)  # the first turn, as the model saw it
    assert prompt2.index("It runs at 2 bar [3].") < prompt2.index("two fact 0")
    t2 = _turn("And the valve?", p2, "It opens at 1 bar [2].")
    prompt3 = build_prompt(
        tokenizer=tokenizer,
        question="When was it changed?",
        passages=p3,
        max_prompt_tokens=budget,
        history=[t1, t2],
    )
    assert prompt3.startswith(prompt2)


def test_a_long_conversation_is_cut_oldest_first_not_refused(tokenizer) -> None:  # type: ignore[no-untyped-def]
    budget = 1500
    history = [
        _turn(f"Question number {i} about the pump?", _passages(f"t{i}"), f"Answer {i}. " * 5)
        for i in range(30)
    ]
    prompt = build_prompt(
        tokenizer=tokenizer,
        question="And the last one?",
        passages=_passages("now"),
        max_prompt_tokens=budget,
        history=history,
    )
    assert count_prompt_tokens(tokenizer=tokenizer, prompt=prompt) <= budget
    assert "now fact 0" in prompt and "And the last one?" in prompt  # this turn first
    assert "Answer 29." in prompt  # the newest turn is kept
    assert "Answer 0." not in prompt  # the oldest went
    assert "Earlier in this conversation, in short:" in prompt


def test_after_a_cut_the_next_turns_share_a_start_again(tokenizer) -> None:  # type: ignore[no-untyped-def]
    """Dropping down to half the turns' budget leaves room to grow: the turns after a
    cut keep one start, so the prefix cache serves them."""
    budget = 900
    history = [_turn(f"Q{i} pump?", [], f"A{i} " * 30) for i in range(12)]

    def prompt(n: int) -> str:
        return build_prompt(
            tokenizer=tokenizer,
            question="and then?",
            passages=_passages("x", 1),
            max_prompt_tokens=budget,
            history=history[:n],
        )

    starts = [prompt(n) for n in range(6, 12)]
    shared = sum(
        later.startswith(earlier[: earlier.rindex("Sources:")])
        for earlier, later in itertools.pairwise(starts)
    )
    assert shared >= 3


def test_a_source_shown_before_is_referenced_not_repeated(tokenizer) -> None:  # type: ignore[no-untyped-def]
    """A follow-up that finds the same passage again adds a reference, not its text;
    the turn then reads the same in the next turn's history (a stable prefix)."""
    budget = 4000
    p1 = _passages("one")
    prompt1 = build_prompt(
        tokenizer=tokenizer, question="How fast is the pump?", passages=p1, max_prompt_tokens=budget
    )
    t1 = _turn("How fast is the pump?", p1, "It runs at 2 bar [3].")
    again = Passage(index=1, text=p1[2].text, path=p1[2].path, page=p1[2].page)
    new = Passage(index=2, text="The valve opens at 1 bar.", path="v.pdf", page=4)
    prompt2 = build_prompt(
        tokenizer=tokenizer,
        question="And how often is that checked?",
        passages=[again, new],
        max_prompt_tokens=budget,
        history=[t1],
    )
    assert prompt2.startswith(prompt1)
    assert prompt2.count(p1[2].text) == 1  # shown once, in the first turn
    assert '[1] (m.pdf, p. 2) the passage shown above that begins "one fact 2:' in prompt2
    assert "[2] (v.pdf, p. 4) The valve opens at 1 bar." in prompt2
    t2 = _turn("And how often is that checked?", [again, new], "Monthly [1].")
    prompt3 = build_prompt(
        tokenizer=tokenizer,
        question="Who checks it?",
        passages=[again],
        max_prompt_tokens=budget,
        history=[t1, t2],
    )
    assert prompt3.startswith(prompt2)
    assert prompt3.count(p1[2].text) == 1


def test_dropped_turns_are_summarised(tokenizer) -> None:  # type: ignore[no-untyped-def]
    """A conversation longer than the budget keeps its newest turns whole and a short
    summary of the dropped ones: each question with its answer's first sentence."""
    budget = 1500
    history = [
        _turn(
            f"Question number {i} about the pump?",
            _passages(f"t{i}"),
            f"The pump needs {i} litres [1]. Then more words follow here [2].",
        )
        for i in range(30)
    ]
    prompt = build_prompt(
        tokenizer=tokenizer,
        question="And the last one?",
        passages=_passages("now"),
        max_prompt_tokens=budget,
        history=history,
    )
    assert count_prompt_tokens(tokenizer=tokenizer, prompt=prompt) <= budget
    summary = prompt[prompt.index("(Earlier in this conversation, in short:") :]
    summary = summary[: summary.index(")")]
    first_kept = int(prompt.split("Question: Question number ")[1].split()[0])
    assert 0 < first_kept < 29
    newest_dropped = first_kept - 1
    assert (
        f"- Asked: Question number {newest_dropped} about the pump? "
        f"Answered: The pump needs {newest_dropped} litres." in summary
    )
    assert "[1]" not in summary and "Then more words" not in summary
    assert "Question number 0 about" not in summary  # the summary has a fixed size


def test_a_question_in_german_asks_for_an_answer_in_german(tokenizer) -> None:  # type: ignore[no-untyped-def]
    """A small model asked in German by the English system prompt answers in English
    unless the language is named after the question."""
    question = "Wie oft muss die Pumpe gewartet werden?"
    prompt = build_prompt(
        tokenizer=tokenizer, question=question, passages=_passages("eins"), max_prompt_tokens=4000
    )
    assert f"Question: {question}\nAnswer in German." in prompt
    unsure = build_prompt(
        tokenizer=tokenizer, question="pump?", passages=_passages("one"), max_prompt_tokens=4000
    )
    assert "Answer in" not in unsure.split("Question: pump?")[1]


def test_a_german_conversation_keeps_its_start_with_the_language_named(tokenizer) -> None:  # type: ignore[no-untyped-def]
    first = "Wie oft muss die Pumpe gewartet werden?"
    p1, p2 = _passages("eins"), _passages("zwei")
    prompt1 = build_prompt(tokenizer=tokenizer, question=first, passages=p1, max_prompt_tokens=4000)
    prompt2 = build_prompt(
        tokenizer=tokenizer,
        question="Und wie lange dauert das Wechseln des Ventils?",
        passages=p2,
        max_prompt_tokens=4000,
        history=[_turn(first, p1, "Jedes Jahr [1].")],
    )
    assert prompt2.startswith(prompt1)  # the earlier turn as the model saw it, line and all
    assert prompt2.count("Answer in German.") == 2


def _spanish(n: int = 2) -> list[Passage]:
    text = "Para firmar el paquete, ejecuta debsign con el nombre del fichero de cambios."
    return [Passage(index=i + 1, text=text, path="guia.pdf", page=i) for i in range(n)]


def test_a_short_spanish_question_over_spanish_sources_asks_for_spanish(tokenizer) -> None:  # type: ignore[no-untyped-def]
    """A guess short of a page's confidence names the language where the sources are
    in it, in the turn asked and when the turn is history."""
    first = "¿Cómo se firma un paquete con debsign?"
    prompt1 = build_prompt(
        tokenizer=tokenizer, question=first, passages=_spanish(), max_prompt_tokens=4000
    )
    assert f"Question: {first}\nAnswer in Spanish." in prompt1
    english = build_prompt(
        tokenizer=tokenizer, question=first, passages=_passages("one"), max_prompt_tokens=4000
    )
    assert "Answer in" not in english.split(f"Question: {first}")[1]
    prompt2 = build_prompt(
        tokenizer=tokenizer,
        question="¿Y qué clave usa por defecto?",
        passages=_spanish(3),
        max_prompt_tokens=4000,
        history=[_turn(first, _spanish(), "Con debsign [1].")],
    )
    assert prompt2.startswith(prompt1)
    assert prompt2.count("Answer in Spanish.") == 2
