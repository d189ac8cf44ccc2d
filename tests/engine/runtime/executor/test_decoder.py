"""engine/runtime/executor/decoder.py against the Hugging Face modules it stands in for, and its
in-place KV and masks."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from gguf import GGMLQuantizationType
from transformers import DynamicCache

from engine.runtime.executor import decoder, int8
from engine.runtime.executor.checkpoint import EMBED, layer_unit
from engine.runtime.executor.forward import StreamingModel
from engine.runtime.executor.generate import GenerationRequest, generate_ids
from engine.runtime.models.gguf_file import companion_folder
from engine.runtime.models.gguf_writer import write_gguf
from tests.engine.runtime.executor.conftest import make_placement

pytestmark = pytest.mark.skipif(not int8.available(), reason="torch has no int8 kernel")


@pytest.fixture(scope="module", params=["llama", "qwen2"])
def q8_dir(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    hf = request.getfixturevalue(f"{request.param}_dir")
    tmp = tmp_path_factory.mktemp(f"decoder-{request.param}")
    path = write_gguf(model_dir=hf, out=tmp / "model.gguf", qtype=GGMLQuantizationType.Q8_0)
    return companion_folder(gguf_path=path, cache=tmp / "cache")


def _model(folder: Path, *, lean: bool, tiers: list[str] | None = None) -> StreamingModel:
    return StreamingModel(
        model_dir=folder,
        placement=make_placement(model_dir=folder, layer_tiers=tiers or ["cpu"] * 4),
        dtype=torch.float32,
        decode="kernel_reference",  # the same matmuls on both sides
        lean=lean,
    )


def _padded_batch() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    ids = torch.tensor([[0, 0, 5, 6, 7, 8], [9, 10, 11, 12, 13, 14]])
    mask = torch.tensor([[0, 0, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1]])
    return ids, mask, (mask.cumsum(-1) - 1).clamp(min=0)


def _logits(model: StreamingModel) -> list[torch.Tensor]:
    """Logits of a left-padded prefill of two rows, then of three decode steps."""
    ids, mask, positions = _padded_batch()
    cache = model.new_cache()
    out = [
        model.forward(
            input_ids=ids,
            attention_mask=mask,
            position_ids=positions,
            cache=cache,
            phase="prefill",
            last_only=False,
        )
    ]
    step_positions = positions[:, -1:]
    for step in range(3):
        token = torch.tensor([[20 + step], [30 + step]])
        mask = torch.cat([mask, torch.ones(2, 1, dtype=torch.long)], dim=1)
        step_positions = step_positions + 1
        out.append(
            model.forward(
                input_ids=token,
                attention_mask=mask,
                position_ids=step_positions,
                cache=cache,
                phase="decode",
            )
        )
    return out


def _assert_same_logits(got: list[torch.Tensor], want: list[torch.Tensor]) -> None:
    """The prefill's logits at the real (unpadded) tokens, then every decode step's."""
    real = _padded_batch()[1].bool()
    assert torch.allclose(got[0][real], want[0][real], rtol=1e-4, atol=1e-4)
    for g, w in zip(got[1:], want[1:], strict=True):
        assert torch.allclose(g, w, rtol=1e-4, atol=1e-4)


def test_the_decoder_computes_what_the_transformers_modules_do(q8_dir: Path) -> None:
    lean, modules = _model(q8_dir, lean=True), _model(q8_dir, lean=False)
    try:
        assert lean._lean and not modules._lean
        assert lean.store.is_stored_only(EMBED)  # rows decoded at each lookup
        got, want = _logits(lean), _logits(modules)
        for g, w in zip(got, want, strict=True):
            # Only the pad rows' own (unread) positions may differ: compare real tokens.
            assert g.shape == w.shape
        _assert_same_logits(got, want)
    finally:
        lean.close()
        modules.close()


def _dense_model(folder: Path, *, lean: bool, kv_host_layers: int | None = None) -> StreamingModel:
    return StreamingModel(
        model_dir=folder,
        placement=make_placement(model_dir=folder, layer_tiers=["cpu"] * 4),
        dtype=torch.float32,
        lean=lean,
        kv_host_layers=kv_host_layers,
    )


def _counting_layers(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    real = decoder.layer

    def counted(*args: object, **kwargs: object) -> torch.Tensor:
        calls.append(1)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(decoder, "layer", counted)
    return calls


@pytest.mark.parametrize("family", ["llama", "qwen2"])
def test_a_model_held_decoded_is_computed_by_the_decoder(
    family: str, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = request.getfixturevalue(f"{family}_dir")  # float32 safetensors: nothing packed
    dense, modules = _dense_model(folder, lean=True), _dense_model(folder, lean=False)
    try:
        assert dense._dense and not dense._lean and not modules._dense
        want = _logits(modules)
        calls = _counting_layers(monkeypatch)
        got = _logits(dense)
        assert len(calls) == 4 * len(got)  # every layer of every forward
        _assert_same_logits(got, want)
    finally:
        dense.close()
        modules.close()


def test_kv_on_the_host_is_attended_to_by_the_modules(
    llama_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tiered, modules = (
        _dense_model(llama_dir, lean=True, kv_host_layers=2),
        _dense_model(llama_dir, lean=False),
    )
    try:
        calls = _counting_layers(monkeypatch)
        got, want = _logits(tiered), _logits(modules)
        assert calls == []  # tiered attention is the modules' own
        for g, w in zip(got[1:], want[1:], strict=True):
            assert torch.allclose(g, w, rtol=1e-4, atol=1e-4)
    finally:
        tiered.close()
        modules.close()


def test_streamed_layers_give_the_resident_tokens(q8_dir: Path) -> None:
    requests = [GenerationRequest(prompt_ids=(1, 40, 41, 42), max_new_tokens=6)]
    resident = _model(q8_dir, lean=True)
    streamed = _model(q8_dir, lean=True, tiers=["cpu", "disk", "cpu", "disk"])
    try:
        assert streamed.store.is_streamed(layer_unit(1))
        assert generate_ids(model=streamed, requests=requests) == generate_ids(
            model=resident, requests=requests
        )
    finally:
        resident.close()
        streamed.close()


def test_kv_is_written_in_place_and_re_adopted_after_replacement() -> None:
    cache = DynamicCache()
    from transformers.cache_utils import DynamicLayer

    layer = DynamicLayer()
    cache.layers.append(layer)
    first = torch.randn(1, 2, 5, 4)
    keys, values = decoder.append_kv(layer, first, first + 1)
    assert torch.equal(keys, first) and torch.equal(values, first + 1)
    buffer = layer._ragdoll_k  # type: ignore[attr-defined]
    step = torch.randn(1, 2, 1, 4)
    keys, _ = decoder.append_kv(layer, step, step)
    assert keys.data_ptr() == buffer.data_ptr()  # the same buffer, written in place
    assert torch.equal(keys, torch.cat([first, step], dim=2))
    # A batch rebuilt elsewhere (rows selected, a prefix put in) replaces the tensors:
    # the next step copies them into a new buffer instead of writing into the old one.
    layer.keys = torch.cat([keys, keys])
    layer.values = torch.cat([layer.values, layer.values])
    two = torch.randn(2, 2, 1, 4)
    keys, values = decoder.append_kv(layer, two, two)
    assert keys.shape == (2, 2, 7, 4)
    assert torch.equal(keys[:, :, -1:], two) and torch.equal(keys[1, :, :6], keys[0, :, :6])


def test_masks_let_no_query_see_nothing_and_none_see_the_future() -> None:
    mask = torch.tensor([[0, 0, 1, 1], [1, 1, 1, 1]])
    made = decoder.attention_mask(mask=mask, queries=4, past=0)
    allowed = made.allowed
    assert allowed is not None and not made.causal
    assert made.padding is not None and made.padding.tolist() == mask.tolist()
    assert allowed.shape == (2, 1, 4, 4)
    assert allowed.any(dim=-1).all()  # a pad query sees itself at least
    assert not allowed[1, 0].triu(1).any()  # nothing after its own column
    assert not allowed[0, 0, 2:, :2].any()  # real tokens never see the padding
    one = decoder.attention_mask(mask=torch.ones(1, 5), queries=1, past=4)
    assert one == decoder.AttentionMask(allowed=None, causal=False)
    first = decoder.attention_mask(mask=torch.ones(1, 5), queries=5, past=0)
    assert first == decoder.AttentionMask(allowed=None, causal=True)
    later = decoder.attention_mask(mask=torch.ones(1, 6), queries=2, past=4)
    offset = later.allowed
    assert (
        later.padding is None and offset is not None and offset[0, 0].sum(dim=-1).tolist() == [5, 6]
    )


def test_a_prompt_in_chunks_gives_the_logits_of_one_pass(
    q8_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A prompt longer than a chunk goes through each layer chunk by chunk (later chunks
    attending to the earlier ones' KV); each layer's matrices are decoded once."""
    from engine.runtime.executor import forward as forward_module
    from engine.runtime.executor import kernel_forms

    def logits() -> list[torch.Tensor]:
        model = _model(q8_dir, lean=True)
        try:
            return _logits(model)
        finally:
            model.close()

    whole = logits()
    monkeypatch.setattr(forward_module, "PREFILL_CHUNK_TOKENS", 4)  # the batch's 6: 4 + 2
    decoded: list[int] = []
    real = kernel_forms.Workspace.keeping_decoded

    def counting(self: kernel_forms.Workspace):  # type: ignore[no-untyped-def]
        decoded.append(1)
        return real(self)

    monkeypatch.setattr(kernel_forms.Workspace, "keeping_decoded", counting)
    chunked = logits()
    assert len(decoded) == 4  # once per layer of the prefill, not per chunk; none in decode
    real_rows = _padded_batch()[1].bool()
    assert torch.allclose(chunked[0][real_rows], whole[0][real_rows], rtol=1e-4, atol=1e-4)
    for c, w in zip(chunked[1:], whole[1:], strict=True):
        assert torch.allclose(c, w, rtol=1e-4, atol=1e-4)
