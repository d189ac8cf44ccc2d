"""`ragdoll bench quality --model`: how a written answer is judged, and the quick form
with a real model over real documents (skipped with a message when either is not
fetched; `make test` fetches both)."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from bench import quality
from bench.quality_model import judge, refuses, rejudge, summarise_by_part
from bench.real_docs import find_real_docs
from bench.real_models import fetch_hint, find_real_model
from engine.rag.answer.marker_check import strip_markers, words

PASSAGES = [
    "git bisect start begins the search.",
    "Use git bisect reset to return to the branch you started from.",
]


def test_a_fact_counts_as_cited_only_with_a_marker_on_a_passage_that_holds_it() -> None:
    fact = "git bisect reset"
    assert judge(text="Run git bisect reset when done [2].", passages=PASSAGES, answer=fact) == (
        True,
        True,
        True,
    )
    # The marker points at a passage that does not hold the fact.
    assert judge(text="Run git bisect reset when done [1].", passages=PASSAGES, answer=fact) == (
        True,
        False,
        False,
    )
    # Stated in a sentence of its own, the marker elsewhere: cited, not by its sentence.
    text = "Run git bisect reset when done. It takes you back to your branch [2]."
    assert judge(text=text, passages=PASSAGES, answer=fact) == (True, True, False)
    # A marker between the fact's words does not hide it.
    assert judge(text="Run git bisect [2] reset.", passages=PASSAGES, answer=fact)[0]
    assert judge(text="Nothing here [2].", passages=PASSAGES, answer=fact) == (False,) * 3


@pytest.mark.parametrize(
    ("reply", "refused"),
    [
        ("I don't know from these documents.", True),
        ("Ich weiß es nicht aus diesen Dokumenten.", True),
        ("Die Quellen enthalten keine Informationen dazu.", True),
        ("Les sources ne mentionnent pas cette option.", True),
        ("No lo sé a partir de estos documentos.", True),
        ("Le fonti non menzionano questa opzione.", True),
        ("Não sou capaz de fornecer uma resposta com base nestas fontes.", True),
        ("De bronnen bevatten geen informatie hierover.", True),
        ("Źródła nie zawierają tej informacji.", True),
        ("文档中没有提到这个选项。", True),
        ("Il pacchetto si installa con apt [1].", False),
        ("Asymptote 先把代码编译成虚拟机代码 [1]。", False),
        ("Use dpkg --search to find the package [1].", False),
        ("Utilisez lb clean --purge avant de reconstruire [2].", False),
    ],
)
def test_a_model_s_refusal_is_heard_in_each_language_the_sets_ask_in(
    reply: str, refused: bool
) -> None:
    assert refuses(reply) is refused


def test_recorded_answers_are_judged_again_per_part_and_language() -> None:
    def record(id_: str, language: str, raw: str, answerable: bool = True) -> dict:
        return {
            "id": id_,
            "split": "blind",
            "language": language,
            "question": "Which command starts the search?",
            "answer": "git bisect start" if answerable else "",
            "answerable": answerable,
            "gate_refused": False,
            "raw": raw,
            "passages": PASSAGES,
            "fallback": "git bisect start begins the search [1].",
        }

    def embed(texts: list[str]):  # type: ignore[no-untyped-def]
        import numpy as np

        rng = np.random.default_rng(0)
        v = rng.normal(size=(len(texts), 8))
        return v / np.linalg.norm(v, axis=1, keepdims=True)

    records = [
        record("a", "de", "Mit git bisect start beginnt die Suche."),
        record("b", "fr", "[2]"),  # bare: the extractive answer stands in, and states it
        record("c", "fr", "Je ne sais pas d'après ces documents.", answerable=False),
    ]
    cross = {**record("d", "en", "git bisect start"), "split": "cross", "doc_language": "de"}
    figures = summarise_by_part(rejudge([*records, cross], embed=embed))
    # The cross-language part: its own rows, in no language's own.
    assert figures["lang:cross asks en"]["answerable"] == 1
    assert figures["lang:cross on de"]["answerable"] == 1 and "lang:en" not in figures
    assert figures["cross"]["answerable"] == 1
    figures = summarise_by_part(rejudge(records, embed=embed))
    assert figures["lang:de"]["stated"] == 1.0 and figures["lang:de"]["model_stated"] == 1.0
    assert figures["lang:fr"]["stated"] == 1.0 and figures["lang:fr"]["model_stated"] == 0.0
    assert figures["lang:fr"]["quoted_instead"] == 1
    assert figures["lang:fr"]["refusal_recall"] == 1.0
    assert figures["all"]["answerable"] == 2 and figures["blind"]["unanswerable"] == 1


MODELS = ("smollm2-135m-instruct-q4_1", "qwen2.5-coder-0.5b-instruct-q4_k_m")


def test_the_quick_form_writes_answers_with_a_real_model(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    model = next((p for p in map(find_real_model, MODELS) if p is not None), None)
    if model is None:
        pytest.skip(fetch_hint(MODELS[0]))
    if find_real_docs() is None:
        pytest.skip("the real documents are not fetched: run `python -m bench.real_docs`")
    monkeypatch.setenv("RAGDOLL_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(quality, "QUICK_FILES", ("git-bisect.txt",))
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", action="store_true")
    quality.add_arguments(parser)
    # One split (the tune part's first two answerable questions and one unanswerable):
    # the held part's questions go through the same path at twice the model's time.
    args = parser.parse_args(
        ["--quick", "--json", "--split", "tune", "--limit", "2", "--model", str(model)]
    )
    figures = quality.run(args)
    written = figures["written"]["all"]
    assert written["answerable"] >= 2 and written["unanswerable"] >= 1
    records = figures["written_records"]
    assert len(records) == len(figures["records"])
    for r in records:
        if r["gate_refused"]:
            assert r["final"] == ""
            continue
        # Never a bare marker, never a marker past the five sources.
        assert len(words(strip_markers(r["final"]))) >= 3, r
        assert all(f"[{n}]" not in r["final"] for n in range(6, 12)), r


def test_an_answer_in_another_language_than_the_question_is_counted() -> None:
    def record(id_: str, language: str, raw: str) -> dict:
        return {
            "id": id_,
            "split": "blind",
            "language": language,
            "question": "?",
            "answer": "fast startup",
            "answerable": True,
            "gate_refused": False,
            "raw": raw,
            "passages": ["Windows' fast startup must be turned off first."],
        }

    def embed(texts: list[str]):  # type: ignore[no-untyped-def]
        import numpy as np

        return np.ones((len(texts), 4)) / 2.0

    records = [
        record("nl", "nl", "Je moet eerst de snelle opstart van Windows uitschakelen."),
        record("en", "nl", "You must turn off fast startup in Windows before installing."),
        record("de", "de", "Sie müssen zuerst den Schnellstart von Windows ausschalten."),
    ]
    figures = summarise_by_part(rejudge(records, embed=embed))
    assert figures["lang:nl"]["same_language"] == 0.5
    assert figures["lang:de"]["same_language"] == 1.0
