"""Generative answers from tiny random-weight models written to disk by the tests."""

from __future__ import annotations

import shutil
import threading
from pathlib import Path

import pytest
from transformers import AutoTokenizer

from engine.errors import ModelLoadError
from engine.rag.answer.generative import (
    GenerativeAnswerer,
)
from engine.rag.answer.in_use import open_model
from engine.rag.answer.passages import Passage
from engine.rag.answer.prompt import build_prompt, count_prompt_tokens, load_system_prompt
from engine.runtime.models.synthetic import write_random_model

PASSAGES = [
    Passage(
        index=1,
        text="The air filter should be cleaned every month and replaced once a year.",
        path="/home/me/docs/manual.pdf",
        page=3,
    ),
    Passage(index=2, text="The warranty covers parts for two years.", path="notes.txt", page=None),
]
QUESTION = "How often should the air filter be cleaned?"


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("models")
    return {
        arch: write_random_model(folder=root / arch, architecture=arch, hidden_size=32)
        for arch in ("llama", "qwen2", "mistral")
    }


@pytest.fixture(scope="module")
def llama(models: dict[str, Path]) -> GenerativeAnswerer:
    return open_model(model_path=models["llama"]).answerer


@pytest.mark.parametrize("architecture", ["llama", "qwen2", "mistral"])
def test_each_architecture_streams_an_answer_within_max_new_tokens(
    models: dict[str, Path], architecture: str
) -> None:
    answerer = open_model(model_path=models[architecture]).answerer
    assert answerer.name == architecture

    pieces = list(answerer.stream(question=QUESTION, passages=PASSAGES, max_new_tokens=12))

    assert "".join(pieces).strip()
    assert all(isinstance(p, str) and p for p in pieces)
    assert answerer.last_generation is not None
    assert 0 < answerer.last_generation.generated_tokens <= 12


def test_greedy_answers_are_repeatable(llama: GenerativeAnswerer) -> None:
    first = "".join(llama.stream(question=QUESTION, passages=PASSAGES, max_new_tokens=10))
    second = "".join(llama.stream(question=QUESTION, passages=PASSAGES, max_new_tokens=10))
    assert first == second


def test_sampling_with_a_temperature_still_answers(llama: GenerativeAnswerer) -> None:
    pieces = list(
        llama.stream(question=QUESTION, passages=PASSAGES, max_new_tokens=10, temperature=0.8)
    )
    assert len(pieces) <= 10


def _generated(answerer: GenerativeAnswerer) -> int:
    assert answerer.last_generation is not None
    return answerer.last_generation.generated_tokens


def test_the_tiny_model_talks_until_max_new_tokens_when_left_alone(
    llama: GenerativeAnswerer,
) -> None:
    # The cancellation tests below mean something only if this holds.
    list(llama.stream(question=QUESTION, passages=PASSAGES, max_new_tokens=200))
    assert _generated(llama) == 200


def test_cancel_stops_generation_early(llama: GenerativeAnswerer) -> None:
    cancel = threading.Event()
    pieces: list[str] = []
    for piece in llama.stream(
        question=QUESTION, passages=PASSAGES, max_new_tokens=200, cancel=cancel
    ):
        pieces.append(piece)
        cancel.set()
    assert len(pieces) == 1
    assert _generated(llama) < 50
    assert llama.last_generation is not None and llama.last_generation.cancelled

    cancel_first = threading.Event()
    cancel_first.set()
    stream = llama.stream(
        question=QUESTION, passages=PASSAGES, max_new_tokens=200, cancel=cancel_first
    )
    assert list(stream) == []
    assert _generated(llama) == 0


def test_leaving_the_stream_stops_generation(llama: GenerativeAnswerer) -> None:
    stream = llama.stream(question=QUESTION, passages=PASSAGES, max_new_tokens=200)
    next(stream)
    stream.close()
    assert _generated(llama) < 50


def test_build_prompt_numbers_the_sources_and_uses_the_chat_template(
    llama: GenerativeAnswerer,
) -> None:
    prompt = build_prompt(
        tokenizer=llama.tokenizer, question=QUESTION, passages=PASSAGES, max_prompt_tokens=2000
    )
    assert "[1] (manual.pdf, p. 3) The air filter should be cleaned every month" in prompt
    assert "[2] (notes.txt) The warranty covers parts for two years." in prompt
    assert load_system_prompt() in prompt
    assert QUESTION in prompt
    assert prompt.startswith("<s><|system|>")
    assert prompt.endswith("<|assistant|>\n")
    assert prompt.index("[1]") < prompt.index("[2]") < prompt.index(QUESTION)


def test_build_prompt_cuts_sources_to_fit_max_prompt_tokens(llama: GenerativeAnswerer) -> None:
    tokenizer = llama.tokenizer
    long_passages = [
        Passage(
            index=i,
            text=f"Passage number {i} says " + "the pump runs quietly. " * 60,
            path=f"doc{i}.txt",
            page=i,
        )
        for i in range(1, 6)
    ]
    full = build_prompt(
        tokenizer=tokenizer, question=QUESTION, passages=long_passages, max_prompt_tokens=100_000
    )
    full_tokens = count_prompt_tokens(tokenizer=tokenizer, prompt=full)

    for limit in (full_tokens - 1, 900, 600, 400):
        prompt = build_prompt(
            tokenizer=tokenizer, question=QUESTION, passages=long_passages, max_prompt_tokens=limit
        )
        assert count_prompt_tokens(tokenizer=tokenizer, prompt=prompt) <= limit
        assert "[1] (doc1.txt, p. 1) Passage number 1" in prompt  # the best source stays
        assert QUESTION in prompt
    assert "[5]" in full
    assert "[5]" not in prompt

    with pytest.raises(ValueError, match="cannot hold"):
        build_prompt(
            tokenizer=tokenizer, question=QUESTION, passages=PASSAGES, max_prompt_tokens=20
        )


def test_a_short_context_model_gets_a_prompt_and_answer_that_fit(tmp_path: Path) -> None:
    folder = write_random_model(
        folder=tmp_path / "short", hidden_size=32, max_position_embeddings=640
    )
    answerer = open_model(model_path=folder).answerer
    assert answerer.context_length == 640
    many = [
        Passage(index=i, text="The pump runs quietly at night. " * 40, path="a.txt", page=None)
        for i in range(1, 6)
    ]
    list(answerer.stream(question=QUESTION, passages=many, max_new_tokens=2000))

    # max_new_tokens is capped at half the context; the sources fill the rest.
    record = answerer.last_generation
    assert record is not None
    assert 0 < record.generated_tokens <= 320
    assert 250 < record.prompt_tokens <= 640 - 320


def test_plain_template_without_a_chat_template(models: dict[str, Path]) -> None:
    tokenizer = AutoTokenizer.from_pretrained(models["qwen2"], local_files_only=True)
    tokenizer.chat_template = None
    prompt = build_prompt(
        tokenizer=tokenizer, question=QUESTION, passages=PASSAGES, max_prompt_tokens=2000
    )
    assert prompt.startswith(load_system_prompt())
    assert prompt.endswith("Answer:")
    assert "[2] (notes.txt)" in prompt


def test_a_broken_model_gives_model_load_error(tmp_path: Path, models: dict[str, Path]) -> None:
    broken = tmp_path / "broken"
    shutil.copytree(models["llama"], broken)
    (broken / "model.safetensors").write_bytes(b"not safetensors")
    with pytest.raises(ModelLoadError, match="Could not load"):
        open_model(model_path=broken)
