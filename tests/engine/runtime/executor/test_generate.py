"""Batched generation: padding, per-request stops, sampling."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from engine.runtime.executor.forward import StreamingModel
from engine.runtime.executor.generate import (
    GenerationRequest,
    Sampling,
    generate,
    generate_ids,
    prefills_rows_apart,
    sample,
)
from tests.engine.runtime.executor.conftest import make_placement

PROMPTS = [(1, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49), (1, 50), (1, 60, 61, 62, 63)]


@pytest.fixture(params=["llama", "qwen2"])
def model(request: pytest.FixtureRequest) -> Iterator[StreamingModel]:
    model_dir: Path = request.getfixturevalue(f"{request.param}_dir")
    placement = make_placement(model_dir=model_dir, layer_tiers=["disk", "cpu", "disk", "cpu"])
    m = StreamingModel(model_dir=model_dir, placement=placement)
    yield m
    m.close()


def test_batched_equals_each_alone(model: StreamingModel) -> None:
    requests = [GenerationRequest(prompt_ids=p, max_new_tokens=8) for p in PROMPTS]
    together = generate_ids(model=model, requests=requests)
    alone = [generate_ids(model=model, requests=[r])[0] for r in requests]
    assert together == alone
    assert all(len(t) >= 1 for t in together)


@pytest.mark.parametrize("tiers", [["cpu"] * 4, ["disk", "cpu", "disk", "cpu"]])
def test_rows_are_prefilled_apart_only_with_every_weight_resident_on_the_cpu(
    llama_dir: Path, tiers: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    placement = make_placement(model_dir=llama_dir, layer_tiers=tiers)  # type: ignore[arg-type]
    m = StreamingModel(model_dir=llama_dir, placement=placement)
    try:
        apart = prefills_rows_apart(m)
        assert apart is (tiers == ["cpu"] * 4)
        phases: list[str] = []
        forward = m.forward

        def counting(**kwargs: object) -> torch.Tensor:
            phases.append(str(kwargs["phase"]))
            return forward(**kwargs)  # type: ignore[arg-type]

        requests = [GenerationRequest(prompt_ids=p, max_new_tokens=4) for p in PROMPTS]
        alone = [generate_ids(model=m, requests=[r])[0] for r in requests]
        monkeypatch.setattr(m, "forward", counting)
        assert generate_ids(model=m, requests=requests) == alone
        assert phases.count("prefill") == (len(PROMPTS) if apart else 1)
    finally:
        m.close()
    gpu = dataclasses.replace(placement, compute_tier="gpu", layer_tiers=("gpu",) * 4)
    assert not prefills_rows_apart(type("Model", (), {"placement": gpu})())  # type: ignore[arg-type]


def test_each_request_stops_at_its_own_budget(model: StreamingModel) -> None:
    eos = set(model.eos_token_ids)
    requests = [
        GenerationRequest(prompt_ids=PROMPTS[0], max_new_tokens=3),
        GenerationRequest(prompt_ids=PROMPTS[1], max_new_tokens=7),
        GenerationRequest(prompt_ids=PROMPTS[2], max_new_tokens=0),
    ]
    events = list(generate(model=model, requests=requests))
    per = {i: [e for e in events if e.request == i] for i in range(3)}
    assert per[2] == []
    for i, budget in ((0, 3), (1, 7)):
        tokens = per[i]
        assert 1 <= len(tokens) <= budget
        assert [e.finished for e in tokens] == [False] * (len(tokens) - 1) + [True]
        # Short of its budget only by stopping on eos.
        assert len(tokens) == budget or tokens[-1].token_id in eos


def test_eos_stops_a_request(model: StreamingModel) -> None:
    # Make the first greedy token eos by declaring it the eos: the request stops there.
    first = generate_ids(
        model=model, requests=[GenerationRequest(prompt_ids=PROMPTS[1], max_new_tokens=1)]
    )[0][0]
    model.config.eos_token_id = first
    got = generate_ids(
        model=model, requests=[GenerationRequest(prompt_ids=PROMPTS[1], max_new_tokens=6)]
    )
    assert got == [[first]]


def test_sampling_is_seeded_and_top_k_1_is_greedy(model: StreamingModel) -> None:
    requests = [GenerationRequest(prompt_ids=p, max_new_tokens=6) for p in PROMPTS]
    hot = Sampling(temperature=1.5, top_p=0.95, seed=7)
    assert generate_ids(model=model, requests=requests, sampling=hot) == generate_ids(
        model=model, requests=requests, sampling=hot
    )
    greedy = generate_ids(model=model, requests=requests)
    top1 = generate_ids(model=model, requests=requests, sampling=Sampling(temperature=1.0, top_k=1))
    assert top1 == greedy


def test_sample_respects_top_p() -> None:
    logits = torch.log(torch.tensor([[0.6, 0.3, 0.05, 0.05]]))
    gen = torch.Generator().manual_seed(0)
    draws = {
        int(sample(logits, sampling=Sampling(temperature=1.0, top_p=0.8), generator=gen))
        for _ in range(200)
    }
    assert draws == {0, 1}


def test_empty_prompt_is_refused(model: StreamingModel) -> None:
    with pytest.raises(ValueError, match="at least one token"):
        list(generate(model=model, requests=[GenerationRequest(prompt_ids=(), max_new_tokens=2)]))


@pytest.mark.parametrize("arch", ["llama", "mistral"])  # merged KV / rebuilt from checkpoints
def test_a_request_joining_at_a_step_boundary_gets_what_it_would_alone(
    arch: str, request: pytest.FixtureRequest
) -> None:
    model_dir: Path = request.getfixturevalue(f"{arch}_dir")
    placement = make_placement(model_dir=model_dir, layer_tiers=["cpu", "disk", "cpu", "disk"])
    model = StreamingModel(model_dir=model_dir, placement=placement)
    try:
        first = GenerationRequest(prompt_ids=PROMPTS[0], max_new_tokens=8)
        late = [
            GenerationRequest(prompt_ids=PROMPTS[1], max_new_tokens=6),
            GenerationRequest(prompt_ids=PROMPTS[2], max_new_tokens=4),
        ]
        alone = [generate_ids(model=model, requests=[r])[0] for r in [first, *late]]
        boundaries = {"n": 0}

        def incoming() -> list[GenerationRequest]:
            boundaries["n"] += 1
            return late if boundaries["n"] == 3 else []

        got: dict[int, list[int]] = {0: [], 1: [], 2: []}
        for event in generate(model=model, requests=[first], incoming=incoming):
            got[event.request].append(event.token_id)
        assert [got[0], got[1], got[2]] == alone
    finally:
        model.close()


def test_cancelling_one_request_frees_its_row_and_leaves_the_others_alone(
    model: StreamingModel,
) -> None:
    requests = [GenerationRequest(prompt_ids=p, max_new_tokens=8) for p in PROMPTS]
    alone = generate_ids(model=model, requests=requests)
    batch_sizes: list[int] = []
    forward = model.forward

    def recording_forward(**kwargs: object) -> torch.Tensor:
        batch_sizes.append(kwargs["input_ids"].shape[0])  # type: ignore[union-attr]
        return forward(**kwargs)  # type: ignore[arg-type]

    model.forward = recording_forward  # type: ignore[method-assign]
    seen: dict[int, list[int]] = {0: [], 1: [], 2: []}
    for event in generate(
        model=model, requests=requests, cancelled=lambda i: i == 1 and len(seen[1]) >= 2
    ):
        seen[event.request].append(event.token_id)
    assert seen[1] == alone[1][:2]
    assert seen[0] == alone[0] and seen[2] == alone[2]
    assert batch_sizes[:2] == [3, 3] and 2 in batch_sizes  # the cancelled row left the batch
    assert max(batch_sizes[2:]) <= 2


def test_per_request_stops_sampling_and_repetition_penalty(model: StreamingModel) -> None:
    greedy = generate_ids(
        model=model, requests=[GenerationRequest(prompt_ids=PROMPTS[0], max_new_tokens=6)]
    )[0]
    stop_at_third = GenerationRequest(
        prompt_ids=PROMPTS[0], max_new_tokens=6, stop_token_ids=(greedy[2],)
    )
    ignore_until_min = GenerationRequest(
        prompt_ids=PROMPTS[0], max_new_tokens=6, stop_token_ids=(greedy[0],), min_new_tokens=3
    )
    got = generate_ids(model=model, requests=[stop_at_third, ignore_until_min])
    assert got[0] == greedy[: greedy.index(greedy[2]) + 1]
    assert got[1][:3] == greedy[:3] and len(got[1]) >= 3

    hot = Sampling(temperature=1.2, seed=3)
    a = GenerationRequest(prompt_ids=PROMPTS[2], max_new_tokens=6, sampling=hot)
    b = GenerationRequest(prompt_ids=PROMPTS[2], max_new_tokens=6, sampling=Sampling(seed=0))
    together = generate_ids(model=model, requests=[a, b])
    assert together[0] == generate_ids(model=model, requests=[a])[0]  # its own seed
    assert together[1] == generate_ids(model=model, requests=[b])[0]  # greedy stays greedy

    penalised = GenerationRequest(
        prompt_ids=PROMPTS[0],
        max_new_tokens=12,
        sampling=Sampling(repetition_penalty=1e6),
    )
    tokens = generate_ids(model=model, requests=[penalised])[0]
    assert not set(tokens) & set(PROMPTS[0])
    assert len(set(tokens)) == len(tokens)  # a huge penalty never repeats a token


def test_a_windowed_repetition_penalty_reaches_only_the_last_tokens() -> None:
    # llama.cpp's repeat_last_n: a token further back than the window may come again.
    from types import SimpleNamespace

    from engine.runtime.executor.generate import _next_token

    logits = torch.zeros(8)
    logits[5], logits[6] = 2.0, 1.9
    sampling = Sampling(repetition_penalty=1.1, repetition_window=2)

    def row(checkpoint: list[int]) -> SimpleNamespace:
        return SimpleNamespace(sampling=sampling, checkpoint=checkpoint, generator=None)

    assert _next_token(logits, row=row([5, 1, 2])) == 5  # 5 is three back: not penalised
    assert _next_token(logits, row=row([1, 5, 2])) == 6  # 5 is within the last two
    whole = SimpleNamespace(
        sampling=Sampling(repetition_penalty=1.1), checkpoint=[5, 1, 2], generator=None
    )
    assert _next_token(logits, row=whole) == 6  # no window: the whole row counts
