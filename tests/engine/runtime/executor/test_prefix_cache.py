"""Prefix KV reuse: PGDSF order, budgets, demotion; and generation that is the same with
the cache as without (tokens, and logits within 1e-4 in float32)."""

from __future__ import annotations

import random
import threading
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import torch

from engine.runtime.executor import generate as generate_module
from engine.runtime.executor.forward import StreamingModel
from engine.runtime.executor.generate import GenerationRequest, generate
from engine.runtime.executor.prefix_cache import PrefixCache
from tests.engine.runtime.executor.conftest import make_placement

CPU = torch.device("cpu")
BLOCK = 2
BLOCK_BYTES = 2 * BLOCK * 4  # keys + values, one layer, one head of size 1, float32


def kv_of(ids: list[int]) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """One layer of KV (kv_heads=1, tokens, head_dim=1) whose values are the token ids."""
    keys = torch.tensor(ids, dtype=torch.float32).reshape(1, len(ids), 1)
    return [keys], [-keys]


def put(cache: PrefixCache, ids: list[int], *, cost: float) -> int:
    keys, values = kv_of(ids)
    return cache.insert(ids, keys=keys, values=values, prefill_s_per_token=cost)


def measured_bytes(cache: PrefixCache) -> dict[str, int]:
    """Bytes of the tensors the cache holds, per tier, counted from the tensors."""
    out = {"device": 0, "host": 0}
    for node in cache._nodes():
        out[node.tier] += sum(t.numel() * t.element_size() for t in (*node.keys, *node.values))
    return out


def test_lookup_returns_the_stored_kv_of_whole_blocks() -> None:
    cache = PrefixCache(device=CPU, device_bytes=0, host_bytes=10 * BLOCK_BYTES, block_tokens=BLOCK)
    assert put(cache, [1, 2, 3, 4, 5], cost=1.0) == 4  # the odd token is not a block
    hit = cache.lookup([1, 2, 3, 4, 9])
    assert hit is not None and hit.tokens == 4
    assert hit.keys[0].flatten().tolist() == [1, 2, 3, 4]
    assert hit.values[0].flatten().tolist() == [-1, -2, -3, -4]
    # At least one token is left to prefill when asked: the second block is read in part.
    short = cache.lookup([1, 2, 3, 4], max_tokens=3)
    assert short is not None and short.tokens == 3
    assert short.keys[0].flatten().tolist() == [1, 2, 3]
    assert cache.lookup([2, 1, 3, 4]) is None
    stats = cache.stats()
    assert (stats.hits, stats.misses, stats.tokens_reused) == (2, 1, 7)
    # A shared start is stored once.
    assert put(cache, [1, 2, 3, 4, 7, 8], cost=1.0) == 2
    assert cache.stats().tokens_stored == 6


def test_pgdsf_evicts_the_lowest_priority_and_raises_the_clock() -> None:
    cache = PrefixCache(device=CPU, device_bytes=0, host_bytes=3 * BLOCK_BYTES, block_tokens=BLOCK)
    # F × C / S with C = 2 tokens × cost per token and S = 16 bytes: F × cost / 8.
    put(cache, [1, 1], cost=1.0)  # 0.125
    put(cache, [2, 2], cost=2.0)  # 0.25
    put(cache, [3, 3], cost=3.2)  # 0.4
    for _ in range(3):  # frequency 4: 0.5, now the most valuable
        assert cache.lookup([1, 1]) is not None

    put(cache, [4, 4], cost=1.0)  # evicts [2, 2]; clock := 0.25
    prio = cache.priorities()
    assert set(prio) == {(1, 1), (3, 3), (4, 4)}
    assert prio[(1, 1)][1] == pytest.approx(0.5)
    assert prio[(4, 4)][1] == pytest.approx(0.25 + 1.0 / 8)  # Clock + F × C / S

    put(cache, [5, 5], cost=2.0)  # evicts [4, 4] (0.375 < 0.4 < 0.5); clock := 0.375
    prio = cache.priorities()
    assert set(prio) == {(1, 1), (3, 3), (5, 5)}
    assert prio[(5, 5)][1] == pytest.approx(0.375 + 2.0 / 8)
    assert cache.stats().evictions == 2

    # An entry worth as much as an older one outlives it: the clock has risen since.
    cache = PrefixCache(device=CPU, device_bytes=0, host_bytes=2 * BLOCK_BYTES, block_tokens=BLOCK)
    put(cache, [1, 1], cost=1.0)
    put(cache, [2, 2], cost=1.5)
    put(cache, [3, 3], cost=1.0)  # evicts [1, 1] (0.125); clock 0.125; [3, 3] = 0.25
    put(cache, [4, 4], cost=1.0)  # [2, 2] = 0.1875 < [3, 3]: the old one goes
    assert set(cache.priorities()) == {(3, 3), (4, 4)}


def test_device_leaves_are_demoted_before_anything_is_evicted() -> None:
    cache = PrefixCache(
        device=CPU, device_bytes=2 * BLOCK_BYTES, host_bytes=2 * BLOCK_BYTES, block_tokens=BLOCK
    )
    put(cache, [1, 1, 2, 2], cost=1.0)
    assert {k: t for k, (t, _) in cache.priorities().items()} == {
        (1, 1): "device",
        (1, 1, 2, 2): "device",
    }
    put(cache, [7, 7], cost=5.0)  # the device is full: its leaf [2, 2] goes to the host
    tiers = {k: t for k, (t, _) in cache.priorities().items()}
    assert tiers == {(1, 1): "device", (1, 1, 2, 2): "host", (7, 7): "device"}
    stats = cache.stats()
    assert (stats.demotions, stats.evictions) == (1, 0)
    assert (stats.device_bytes, stats.host_bytes) == (2 * BLOCK_BYTES, BLOCK_BYTES)
    # A child of a host node is stored on the host, never above its parent.
    put(cache, [1, 1, 2, 2, 3, 3], cost=9.0)
    assert cache.priorities()[(1, 1, 2, 2, 3, 3)][0] == "host"
    # The whole path is still a hit, across both tiers.
    hit = cache.lookup([1, 1, 2, 2, 3, 3, 0])
    assert hit is not None and hit.keys[0].flatten().tolist() == [1, 1, 2, 2, 3, 3]


def test_budgets_hold_and_the_tree_stays_prefix_closed_under_churn() -> None:
    rng = random.Random(5)
    cache = PrefixCache(
        device=CPU, device_bytes=5 * BLOCK_BYTES, host_bytes=7 * BLOCK_BYTES, block_tokens=BLOCK
    )
    for _ in range(300):
        ids = [rng.randrange(3) for _ in range(2 * rng.randrange(1, 6))]
        if rng.random() < 0.5:
            put(cache, ids, cost=rng.uniform(0.1, 3.0))
        else:
            cache.lookup(ids)
        used = measured_bytes(cache)
        stats = cache.stats()
        assert used == {"device": stats.device_bytes, "host": stats.host_bytes}
        assert used["device"] <= 5 * BLOCK_BYTES and used["host"] <= 7 * BLOCK_BYTES
        for node in cache._nodes():
            assert node.parent is not None
            if node.tier == "device":
                assert node.parent.tier == "device"  # device nodes never hang off host ones
            assert node.parent is cache._root or node.block in node.parent.children
        for tier in ("device", "host"):  # the leaf sets eviction picks from are the leaves
            leaves = {
                n
                for n in cache._nodes()
                if n.tier == tier and not any(c.tier == tier for c in n.children.values())
            }
            assert cache._leaves[tier] == leaves  # type: ignore[index]
    assert cache.stats().evictions > 0 and cache.stats().demotions > 0


def test_threads_sharing_one_cache_keep_it_consistent() -> None:
    import threading

    cache = PrefixCache(
        device=CPU, device_bytes=6 * BLOCK_BYTES, host_bytes=9 * BLOCK_BYTES, block_tokens=BLOCK
    )
    errors: list[BaseException] = []

    def work(seed: int) -> None:
        rng = random.Random(seed)
        try:
            for _ in range(200):
                ids = [rng.randrange(3) for _ in range(2 * rng.randrange(1, 5))]
                if rng.random() < 0.5:
                    put(cache, ids, cost=rng.uniform(0.1, 3.0))
                else:
                    hit = cache.lookup(ids)
                    # Whatever is found is the KV of exactly those tokens.
                    assert hit is None or hit.keys[0].flatten().tolist() == ids[: hit.tokens]
        except BaseException as e:  # surfaced below, in the test's thread
            errors.append(e)

    threads = [threading.Thread(target=work, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    stats = cache.stats()
    assert measured_bytes(cache) == {"device": stats.device_bytes, "host": stats.host_bytes}
    assert stats.lookups + stats.evictions > 0


def test_an_entry_larger_than_both_budgets_is_not_stored() -> None:
    cache = PrefixCache(device=CPU, device_bytes=0, host_bytes=BLOCK_BYTES - 1, block_tokens=BLOCK)
    assert put(cache, [1, 2], cost=1.0) == 0
    assert cache.lookup([1, 2, 3]) is None


# ---------------------------------------------------------------- generation


@pytest.fixture(scope="module", params=["llama", "qwen2"])
def model(request: pytest.FixtureRequest) -> Iterator[StreamingModel]:
    model_dir: Path = request.getfixturevalue(f"{request.param}_dir")
    placement = make_placement(model_dir=model_dir, layer_tiers=["cpu"] * 4)
    m = StreamingModel(model_dir=model_dir, placement=placement)
    yield m
    m.close()


def ids(seed: int, n: int) -> tuple[int, ...]:
    g = torch.Generator().manual_seed(seed)
    return tuple(int(t) for t in torch.randint(5, 120, (n,), generator=g))


SYSTEM = ids(0, 37)


def run(
    model: StreamingModel,
    prompts: list[tuple[int, ...]],
    monkeypatch: pytest.MonkeyPatch,
    cache: PrefixCache | None,
    tokens: int = 5,
    incoming: Callable[[], list[GenerationRequest]] | None = None,
) -> tuple[list[list[int]], dict[int, list[torch.Tensor]]]:
    """Greedy tokens per request, and the logits each token was chosen from."""
    seen: dict[int, list[torch.Tensor]] = defaultdict(list)
    choose = generate_module._next_token

    def spy(logits: torch.Tensor, *, row: generate_module._Row) -> int:
        seen[row.index].append(logits.clone())
        return choose(logits, row=row)

    monkeypatch.setattr(generate_module, "_next_token", spy)
    requests = [GenerationRequest(prompt_ids=p, max_new_tokens=tokens) for p in prompts]
    out: dict[int, list[int]] = defaultdict(list)
    for event in generate(model=model, requests=requests, prefix_cache=cache, incoming=incoming):
        out[event.request].append(event.token_id)
    monkeypatch.setattr(generate_module, "_next_token", choose)
    return [out[i] for i in sorted(out)], seen


def same(
    a: tuple[list[list[int]], dict[int, list[torch.Tensor]]],
    b: tuple[list[list[int]], dict[int, list[torch.Tensor]]],
) -> None:
    assert a[0] == b[0]
    for i, logits in a[1].items():
        assert len(logits) == len(b[1][i])
        for x, y in zip(logits, b[1][i], strict=True):
            torch.testing.assert_close(x, y, atol=1e-4, rtol=0)


def new_cache(block: int = 16) -> PrefixCache:
    return PrefixCache(device=CPU, device_bytes=0, host_bytes=64 * 2**20, block_tokens=block)


def test_a_repeated_prompt_reuses_its_kv_and_generates_the_same(
    model: StreamingModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    prompt = SYSTEM + ids(1, 12)
    plain = run(model, [prompt], monkeypatch, None)
    cache = new_cache()
    same(run(model, [prompt], monkeypatch, cache), plain)
    first = cache.stats()
    assert first.hits == 0 and first.tokens_stored >= 48
    fed: list[int] = []
    forward = model.forward

    def counting(**kwargs: object) -> torch.Tensor:
        fed.append(kwargs["input_ids"].shape[1])  # type: ignore[union-attr]
        return forward(**kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(model, "forward", counting)
    same(run(model, [prompt], monkeypatch, cache), plain)
    stats = cache.stats()
    assert stats.hits == 1 and stats.tokens_reused == 48  # 49 tokens, 48 of them cached
    assert fed == [1, 1, 1, 1, 1]  # the prefill fed the one token not cached


def test_a_prompt_sharing_only_the_system_prompt(
    model: StreamingModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = SYSTEM + ids(2, 20), SYSTEM + ids(3, 9)
    plain = run(model, [second], monkeypatch, None)
    cache = new_cache()
    run(model, [first], monkeypatch, cache)
    same(run(model, [second], monkeypatch, cache), plain)
    # The whole system prompt: two whole blocks and the 5 tokens of the third it shares.
    assert cache.stats().tokens_reused == len(SYSTEM)


def test_the_next_turn_reuses_the_answer_too(
    model: StreamingModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    turn1 = SYSTEM + ids(4, 10)
    cache = new_cache(block=4)
    answer = run(model, [turn1], monkeypatch, cache, tokens=9)[0][0]
    turn2 = turn1 + tuple(answer) + ids(5, 6)
    plain = run(model, [turn2], monkeypatch, None)
    same(run(model, [turn2], monkeypatch, cache), plain)
    # The prompt and all but the last answer token were cached, in whole blocks.
    assert cache.stats().tokens_reused == (len(turn1) + len(answer) - 1) // 4 * 4


def test_a_turn_that_parts_mid_block_reuses_up_to_where_it_parts(
    model: StreamingModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The next turn re-renders the answer (here: not at all) right after the cached
    prompt, inside a stored block: the block's shared start is reused, not prefilled."""
    turn1 = SYSTEM + ids(4, 10)  # 47 tokens: the answer's block starts at 32
    cache = new_cache()
    run(model, [turn1], monkeypatch, cache, tokens=9)  # stores 48 of prompt + answer
    turn2 = turn1 + ids(11, 20)
    plain = run(model, [turn2], monkeypatch, None)
    same(run(model, [turn2], monkeypatch, cache), plain)
    assert cache.stats().tokens_reused == len(turn1)  # 47, not the 32 of whole blocks


def test_a_caller_that_stops_at_the_last_token_still_leaves_the_answer_cached(
    model: StreamingModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pipeline closes the stream as soon as every answer is complete, before the
    step that stores them: the answer's KV must reach the cache all the same."""
    turn1 = SYSTEM + ids(4, 10)
    cache = new_cache(block=4)
    events = generate(
        model=model,
        requests=[GenerationRequest(prompt_ids=turn1, max_new_tokens=9)],
        prefix_cache=cache,
    )
    answer: list[int] = []
    for event in events:
        answer.append(event.token_id)
        if event.finished:
            break
    events.close()
    turn2 = turn1 + tuple(answer) + ids(5, 6)
    plain = run(model, [turn2], monkeypatch, None)
    same(run(model, [turn2], monkeypatch, cache), plain)
    # The prompt and the answer but its last token (never fed), in whole blocks: the
    # prompt alone would give 44.
    assert cache.stats().tokens_reused == (len(turn1) + len(answer) - 1) // 4 * 4 == 52


@pytest.mark.parametrize("closed", [False, True])
def test_a_row_stopped_as_it_finishes_leaves_no_answer_cached(
    model: StreamingModel, closed: bool
) -> None:
    """The pipeline may start on a question before its relevance verdict and stop the
    row once the verdict refuses it, after its last token: that answer is nobody's,
    and the stream, read on or closed, keeps no KV past the prompt."""
    turn1 = SYSTEM + ids(4, 10)  # 47 tokens: 44 in whole blocks of 4
    cache = new_cache(block=4)
    stopped = threading.Event()
    events = generate(
        model=model,
        requests=[GenerationRequest(prompt_ids=turn1, max_new_tokens=9)],
        prefix_cache=cache,
        cancelled=lambda i: stopped.is_set(),
    )
    answer: list[int] = []
    for event in events:
        answer.append(event.token_id)
        if event.finished:
            stopped.set()  # the verdict came with the last token
            if closed:
                break
    events.close()
    assert len(answer) == 9
    assert cache.stats().tokens_stored == len(turn1) // 4 * 4
    hit = cache.lookup(list(turn1 + tuple(answer)))
    assert hit is not None and hit.tokens == len(turn1) // 4 * 4


@pytest.mark.parametrize("apart", [False, True])
def test_a_batch_mixing_hits_and_misses(
    model: StreamingModel, monkeypatch: pytest.MonkeyPatch, apart: bool
) -> None:
    """Prefilled in one forward (a streamed model reads its weights once) or a forward
    a row (resident on the CPU: generate.prefills_rows_apart), the same tokens."""
    monkeypatch.setattr(generate_module, "prefills_rows_apart", lambda model: apart)
    warm = SYSTEM + ids(6, 30)
    batch = [
        ids(7, 23),  # miss
        warm + ids(8, 5),  # hit, long
        SYSTEM + ids(9, 3),  # hit on the system prompt
        ids(10, 4),  # miss, short
        warm,  # hit, all but its last block
    ]
    plain = run(model, batch, monkeypatch, None)
    cache = new_cache()
    run(model, [warm], monkeypatch, cache, tokens=1)
    phases: list[str] = []
    forward = model.forward

    def counting(**kwargs: object) -> torch.Tensor:
        phases.append(str(kwargs["phase"]))
        return forward(**kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(model, "forward", counting)
    same(run(model, batch, monkeypatch, cache), plain)
    stats = cache.stats()
    assert stats.hits == 3 and stats.misses == 3  # the warm-up's miss and the batch's two
    assert phases.count("prefill") == (len(batch) if apart else 1)


def test_rows_prefilled_apart_share_the_start_the_first_one_stored(
    model: StreamingModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rows that start together, prefilled a forward each: each stores its prompt before
    the next looks up its own, so the rows after the first reuse their system prompt."""
    monkeypatch.setattr(generate_module, "prefills_rows_apart", lambda model: True)
    batch = [SYSTEM + ids(22, 9), SYSTEM + ids(23, 30), SYSTEM + ids(24, 4)]
    plain = run(model, batch, monkeypatch, None)
    cache = new_cache()
    same(run(model, batch, monkeypatch, cache), plain)
    stats = cache.stats()
    assert (stats.hits, stats.misses) == (2, 1)
    assert stats.tokens_reused >= 2 * (len(SYSTEM) // 16 * 16)  # whole blocks at least


def test_rows_joining_mid_generation_use_the_cache(
    model: StreamingModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = new_cache()
    run(model, [SYSTEM + ids(11, 3)], monkeypatch, cache, tokens=1)
    late = [SYSTEM + ids(12, 7), ids(13, 9)]

    def arrivals() -> Callable[[], list[GenerationRequest]]:
        pending = [late]

        def incoming() -> list[GenerationRequest]:
            batch = pending.pop() if pending else []
            return [GenerationRequest(prompt_ids=p, max_new_tokens=5) for p in batch]

        return incoming

    first = [ids(14, 15)]
    plain = run(model, first, monkeypatch, None, tokens=8, incoming=arrivals())
    same(run(model, first, monkeypatch, cache, tokens=8, incoming=arrivals()), plain)
    assert cache.stats().hits == 1  # the late row with the system prompt


def test_a_sliding_window_model_prefills_whole(
    mistral_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    placement = make_placement(model_dir=mistral_dir, layer_tiers=["cpu"] * 4)
    m = StreamingModel(model_dir=mistral_dir, placement=placement)
    try:
        prompt = SYSTEM + ids(15, 12)
        cache = new_cache()
        plain = run(m, [prompt], monkeypatch, None)
        if not generate_module._plain(m.new_cache()):
            same(run(m, [prompt], monkeypatch, cache), plain)
            same(run(m, [prompt], monkeypatch, cache), plain)
            assert cache.stats().lookups == 0 and cache.stats().tokens_stored == 0
        else:  # this config has no window: the cache is used like any other
            run(m, [prompt], monkeypatch, cache)
            same(run(m, [prompt], monkeypatch, cache), plain)
            assert cache.stats().hits == 1
    finally:
        m.close()


def test_out_of_memory_with_the_cache_recovers_with_the_same_tokens(
    llama_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    placement = make_placement(model_dir=llama_dir, layer_tiers=["cpu"] * 4)
    calls = {"n": 0, "fail_at": -1}

    def fault(unit: str) -> None:
        calls["n"] += 1
        if calls["n"] == calls["fail_at"]:
            raise torch.OutOfMemoryError("injected")

    m = StreamingModel(model_dir=llama_dir, placement=placement, fault_hook=fault)
    try:
        prompts = [SYSTEM + ids(16, 5), ids(17, 20)]
        plain = run(m, prompts, monkeypatch, None, tokens=6)
        cache = new_cache()
        run(m, [SYSTEM + ids(18, 3)], monkeypatch, cache, tokens=2)
        for fail_after in (3, 20):  # in the prefill on cached KV, then in a decode step
            calls["fail_at"] = calls["n"] + fail_after
            got = run(m, prompts, monkeypatch, cache, tokens=6)
            assert got[0] == plain[0]
            assert calls["n"] > calls["fail_at"]
        assert cache.stats().hits >= 2
    finally:
        m.close()


def test_the_answerer_reuses_the_prompt_of_a_repeated_question(tmp_path: Path) -> None:
    from engine.rag.answer.in_use import open_model
    from engine.rag.answer.passages import Passage
    from engine.runtime.models.synthetic import write_random_model

    folder = write_random_model(folder=tmp_path / "llama", hidden_size=32, num_layers=2)
    answerer = open_model(model_path=folder, device="cpu").answerer
    try:
        assert answerer.prefix_cache is not None
        assert answerer.prefix_cache.stats().host_budget > 0
        passages = [Passage(index=1, text="The pump is serviced in May.", path="a.md", page=None)]
        ask = {"question": "When is the pump serviced?", "passages": passages, "max_new_tokens": 4}
        first = "".join(answerer.stream(**ask))  # type: ignore[arg-type]
        assert answerer.prefix_cache.stats().hits == 0
        assert "".join(answerer.stream(**ask)) == first  # type: ignore[arg-type]
        stats = answerer.prefix_cache.stats()
        assert stats.hits == 1 and stats.tokens_reused > 0
        answerer.prefix_cache = None  # reuse can be turned off
        assert "".join(answerer.stream(**ask)) == first  # type: ignore[arg-type]
    finally:
        answerer.close()


def test_host_resident_kv_layers_take_the_cached_kv_where_they_keep_it(
    llama_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    placement = make_placement(model_dir=llama_dir, layer_tiers=["cpu"] * 4)
    m = StreamingModel(model_dir=llama_dir, placement=placement, kv_host_layers=2)
    try:
        assert sum(generate_module.is_host_layer(x) for x in m.new_cache().layers) == 2
        warm = SYSTEM + ids(19, 20)
        batch = [warm + ids(20, 4), ids(21, 9)]
        plain = run(m, batch, monkeypatch, None)
        cache = new_cache()
        run(m, [warm], monkeypatch, cache, tokens=1)
        same(run(m, batch, monkeypatch, cache), plain)
        assert cache.stats().hits == 1
    finally:
        m.close()
