"""A decode step's layer in the native library against engine/runtime/executor/decoder.py's
layer on the same inputs (Llama with the GGUF's q/k rows permuted, Qwen2 with q/k/v
biases; grouped KV heads), the model's step taking it, and the cases it leaves to Python."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from gguf import GGMLQuantizationType as T
from transformers.cache_utils import DynamicLayer

from engine.runtime.executor import decoder, ggml_native
from engine.runtime.executor.checkpoint import EMBED, layer_unit
from engine.runtime.executor.forward import StreamingModel
from engine.runtime.executor.native_layer import NativeLayers, step_inputs
from engine.runtime.models.gguf_file import companion_folder
from engine.runtime.models.gguf_writer import write_gguf
from engine.runtime.models.synthetic import write_random_model
from tests.engine.runtime.executor.conftest import make_placement

pytestmark = pytest.mark.skipif(
    ggml_native.library() is None, reason="no C compiler here: the native library is absent"
)


def _q4_k_m(name: str) -> T:
    return T.Q6_K if name.endswith(("blk.0.attn_v.weight", "blk.1.ffn_down.weight")) else T.Q4_K


@pytest.fixture(scope="module", params=["llama", "qwen2"])
def gguf_dir(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp(f"native-{request.param}")
    hf = write_random_model(
        folder=tmp / "hf",
        architecture=request.param,
        hidden_size=256,
        num_layers=3,
        num_heads=4,
        num_kv_heads=2,
        intermediate_size=512,
        vocab_size=832,
        seed=11,
    )
    path = write_gguf(model_dir=hf, out=tmp / "model.gguf", qtype=T.Q4_K, qtype_of=_q4_k_m)
    return companion_folder(gguf_path=path, cache=tmp / "cache")


def _model(folder: Path) -> StreamingModel:
    return StreamingModel(
        model_dir=folder, placement=make_placement(model_dir=folder), dtype=torch.float32
    )


def _cache_layer(keys: torch.Tensor, values: torch.Tensor) -> DynamicLayer:
    layer = DynamicLayer()
    decoder.append_kv(layer, keys.clone(), values.clone())
    return layer


def test_layer_matches_the_python_layer(gguf_dir: Path) -> None:
    model = _model(gguf_dir)
    native = model._native_layers
    assert native is not None, "every matrix is in the native form: the native step is on"
    shape = model._shape
    torch.manual_seed(0)
    for index in range(len(model._layers)):
        tensors = model.store.resident(layer_unit(index))
        past = 40  # blocks of 16 keys and a tail (the attention's two loops)
        keys = torch.randn(1, shape.kv_heads, past, shape.head_dim)
        values = torch.randn(1, shape.kv_heads, past, shape.head_dim)
        hidden = torch.randn(1, 1, model.config.hidden_size)
        cos, sin = model._rotary(hidden, torch.tensor([[past]]))
        want_kv = _cache_layer(keys, values)
        want = decoder.layer(
            hidden,
            tensors=tensors,
            shape=shape,
            rotary=(cos, sin),
            kv=want_kv,
            mask=decoder.AttentionMask(allowed=None, causal=False),
            buffer=model.store.workspace,
        )
        got_kv = _cache_layer(keys, values)
        got = native.step(
            index,
            hidden,
            tensors=tensors,
            inputs=step_inputs(rotary=(cos, sin), allowed=None),
            kv=got_kv,
            keep=True,
        )
        assert got is not None
        change = (want - hidden).norm()
        assert (got - want).norm() / change < 1e-4
        # The new key and value went into the cache as the Python layer puts them.
        assert got_kv.keys.shape[-2] == past + 1
        torch.testing.assert_close(got_kv.keys, want_kv.keys, rtol=1e-4, atol=1e-5)
        torch.testing.assert_close(got_kv.values, want_kv.values, rtol=1e-4, atol=1e-5)
    model.close()


def test_decode_steps_take_the_native_layers(gguf_dir: Path) -> None:
    """Greedy steps through the model: one native call computes every layer of a
    one-row step (the native step a layer at a time where that call declines, with the
    same logits), and the logits stay those of the Python layers (a relative difference
    from the activations' int8 rounding, not an error that grows)."""
    model = _model(gguf_dir)
    native = model._native_layers
    assert native is not None
    whole: list[int] = []
    single: list[int] = []
    declined: list[bool] = []
    step, step_layers = native.step, native.step_layers

    def one(index: int, *args: object, **kwargs: object) -> torch.Tensor | None:
        single.append(index)
        return step(index, *args, **kwargs)  # type: ignore[arg-type]

    def every(*args: object, **kwargs: object) -> torch.Tensor | None:
        whole.append(1)
        return None if declined else step_layers(*args, **kwargs)  # type: ignore[arg-type]

    native.step = one  # type: ignore[method-assign]
    native.step_layers = every  # type: ignore[method-assign]
    prompt = torch.tensor([[5, 17, 42, 99, 7, 3]])

    def greedy(use_native: bool) -> list[torch.Tensor]:
        model._native_layers = native if use_native else None
        cache = model.new_cache()
        t = prompt.shape[1]
        logits = model.forward(
            input_ids=prompt,
            attention_mask=torch.ones(1, t, dtype=torch.long),
            position_ids=torch.arange(t)[None],
            cache=cache,
            phase="prefill",
        )
        out = []
        token = prompt[:, -1:]
        for i in range(4):
            token = logits[:, -1].argmax(-1, keepdim=True) if i else token
            logits = model.forward(
                input_ids=token,
                attention_mask=torch.ones(1, t + i + 1, dtype=torch.long),
                position_ids=torch.tensor([[t + i]]),
                cache=cache,
                phase="decode",
            )
            out.append(logits[0, -1])
        return out

    python = greedy(False)
    assert whole == single == []
    got = greedy(True)
    assert len(whole) == 4 and single == []
    declined.append(True)
    one_at_a_time = greedy(True)
    assert single == list(range(len(model._layers))) * 4
    for a, b in zip(got, one_at_a_time, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)
    first = (got[0] - python[0]).norm() / python[0].norm()
    assert first < 0.05
    model.close()


def _padded_step(model: StreamingModel) -> torch.Tensor:
    """One decode step of two rows, the first left-padded, after their prefill."""
    cache = model.new_cache()
    prompts = torch.tensor([[0, 0, 5, 6], [4, 5, 6, 7]])
    mask = torch.tensor([[0, 0, 1, 1], [1, 1, 1, 1]])
    model.forward(
        input_ids=prompts,
        attention_mask=mask,
        position_ids=torch.tensor([[0, 0, 0, 1], [0, 1, 2, 3]]),
        cache=cache,
        phase="prefill",
    )
    return model.forward(
        input_ids=torch.tensor([[8], [9]]),
        attention_mask=torch.cat([mask, torch.ones(2, 1, dtype=torch.long)], dim=1),
        position_ids=torch.tensor([[2], [4]]),
        cache=cache,
        phase="decode",
    )[:, -1]


def test_a_padded_batch_step_matches_the_python_layers(gguf_dir: Path) -> None:
    """Two rows, one with left padding the native attention must not look at."""
    model = _model(gguf_dir)
    native = model._native_layers
    assert native is not None
    calls: list[int] = []
    step_layers = native.step_layers
    native.step_layers = lambda *a, **k: calls.append(1) or step_layers(*a, **k)  # type: ignore[method-assign]
    got = _padded_step(model)
    assert calls == [1]
    model._native_layers = None
    want = _padded_step(model)
    for row in range(2):
        assert (got[row] - want[row]).norm() / want[row].norm() < 0.05
    model.close()


def test_the_native_layer_sees_no_padded_position(gguf_dir: Path) -> None:
    """Values planted at a row's padded positions change nothing in that row."""
    model = _model(gguf_dir)
    native = model._native_layers
    assert native is not None
    shape = model._shape
    tensors = model.store.resident(layer_unit(1))
    torch.manual_seed(3)
    keys = torch.randn(2, shape.kv_heads, 20, shape.head_dim)
    values = torch.randn(2, shape.kv_heads, 20, shape.head_dim)
    allowed = torch.ones(2, 1, 1, 21, dtype=torch.bool)
    allowed[0, ..., :2] = False
    hidden = torch.randn(2, 1, model.config.hidden_size)
    cos, sin = model._rotary(hidden, torch.tensor([[3], [5]]))
    outs = []
    for planted in (0.0, 50.0):
        k, v = keys.clone(), values.clone()
        k[0, :, :2] += planted
        v[0, :, :2] += planted
        out = native.step(
            1,
            hidden,
            tensors=tensors,
            inputs=step_inputs(rotary=(cos, sin), allowed=allowed),
            kv=_cache_layer(k, v),
            keep=True,
        )
        assert out is not None
        outs.append(out)
    torch.testing.assert_close(outs[0][0], outs[1][0])
    model.close()


def test_a_layer_not_in_the_native_form_is_left_to_python(gguf_dir: Path) -> None:
    model = _model(gguf_dir)
    lib = ggml_native.library()
    assert lib is not None
    native = NativeLayers(lib=lib, shape=model._shape, threads=1)
    tensors = dict(model.store.resident(layer_unit(0)))
    tensors["self_attn.o_proj.bias"] = torch.zeros(model.config.hidden_size)
    hidden = torch.randn(1, 1, model.config.hidden_size)
    cos, sin = model._rotary(hidden, torch.tensor([[0]]))
    kv = DynamicLayer()
    assert (
        native.step(
            0,
            hidden,
            tensors=tensors,
            inputs=step_inputs(rotary=(cos, sin), allowed=None),
            kv=kv,
            keep=True,
        )
        is None
    )
    assert not getattr(kv, "is_initialized", False), "nothing was written to the cache"
    embed = model.store.resident(EMBED)
    assert embed  # the model itself is untouched
    model.close()


def test_torch_forms_have_no_native_layer(qwen2_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ggml_native.FORCE_TORCH_ENV, "1")
    model = StreamingModel(
        model_dir=qwen2_dir, placement=make_placement(model_dir=qwen2_dir), dtype=torch.float32
    )
    assert model._native_layers is None
    model.close()
