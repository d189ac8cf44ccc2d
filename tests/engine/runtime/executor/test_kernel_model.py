"""A Q4_K_M-style GGUF model (Q4_K, with Q6_K for some v and down matrices and the head)
computed in the kernel forms: its greedy tokens against the kernels' dequantize-then-
matmul reference, resident and streamed, what it holds, and how it is chosen."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from gguf import GGMLQuantizationType as T

from engine.runtime.executor import ggml_native, int4, int8
from engine.runtime.executor.checkpoint import EMBED, HEAD, index_checkpoint, layer_unit
from engine.runtime.executor.forward import StreamingModel
from engine.runtime.executor.generate import GenerationRequest, generate_ids
from engine.runtime.executor.packed import choose_decode, kernel_bytes
from engine.runtime.models.gguf_file import companion_folder
from engine.runtime.models.gguf_writer import write_gguf
from engine.runtime.models.synthetic import write_random_model
from tests.engine.runtime.executor.conftest import make_placement

pytestmark = pytest.mark.skipif(
    not (int4.available() and int8.available()), reason="torch lacks the CPU kernels"
)

PROMPTS = [(1, 40, 41, 42, 43, 44, 45, 46), (1, 50, 51, 52)]


@pytest.fixture(autouse=True)
def torch_forms(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests are about torch's kernel forms (the native "ggml" form has its own:
    tests/engine/runtime/executor/test_ggml_native.py)."""
    monkeypatch.setenv(ggml_native.FORCE_TORCH_ENV, "1")


def q4_k_m(name: str) -> T:
    """llama.cpp's Q4_K_M mix, in short: Q6_K for the head and for the v and down
    matrices of some layers, Q4_K elsewhere."""
    if name == "output.weight" or name.endswith(("blk.0.attn_v.weight", "blk.2.ffn_down.weight")):
        return T.Q6_K
    return T.Q4_K


@pytest.fixture(scope="module")
def km_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("q4_k_m")
    hf = write_random_model(
        folder=tmp / "hf",
        architecture="llama",  # q/k rows permuted in the GGUF: put back in every form
        hidden_size=256,
        num_layers=4,
        num_heads=4,
        num_kv_heads=2,
        intermediate_size=512,
        vocab_size=832,
        seed=5,
    )
    path = write_gguf(model_dir=hf, out=tmp / "model.gguf", qtype=T.Q4_K, qtype_of=q4_k_m)
    return companion_folder(gguf_path=path, cache=tmp / "cache")


def _greedy(model: StreamingModel) -> list[list[int]]:
    requests = [GenerationRequest(prompt_ids=p, max_new_tokens=8) for p in PROMPTS]
    return generate_ids(model=model, requests=requests)


def _model(folder: Path, tiers: list[str], **kwargs: object) -> StreamingModel:
    return StreamingModel(
        model_dir=folder,
        placement=make_placement(model_dir=folder, layer_tiers=tiers),
        dtype=torch.float32,
        **kwargs,  # type: ignore[arg-type]
    )


@pytest.mark.parametrize(
    "tiers", [["cpu"] * 4, ["cpu", "disk", "cpu", "disk"]], ids=["resident", "half_disk"]
)
def test_kernel_model_gives_the_tokens_of_its_reference(km_dir: Path, tiers: list[str]) -> None:
    kernel = _model(km_dir, tiers, decode="kernel")
    reference = _model(km_dir, tiers, decode="kernel_reference")
    try:
        assert _greedy(kernel) == _greedy(reference)
        assert kernel.store.is_packed(HEAD) and kernel.store.is_stored_only(EMBED)
        held = kernel.store.held_bytes()
        for i, tier in enumerate(tiers):
            unit = layer_unit(i)
            if tier == "cpu":
                # The kernel forms and the decoded norms, never a float32 matrix.
                sources = kernel.store.sources_of(unit)
                assert held[unit] == sum(kernel_bytes(s) for s in sources)
            else:
                assert held[unit] == 0
        tensors = kernel.store.resident(layer_unit(0))
        assert "self_attn.v_proj.weight:int8" in tensors  # Q6_K: not fused with q, k
        assert "mlp.gate_up_proj.weight:int4" in tensors
        assert "self_attn.qkv_proj.weight:int4" in kernel.store.resident(layer_unit(2))
    finally:
        kernel.close()
        reference.close()


def test_kernel_logits_close_to_the_files_exact_values(km_dir: Path) -> None:
    """Against the file's values decoded once to float32 (compressed=False) the kernels
    are close but not equal: bfloat16 scales and activations, Q6_K requantized to int8."""
    ids = torch.tensor([PROMPTS[0]])
    out = {}
    for name, kwargs in [("kernel", {"decode": "kernel"}), ("exact", {"compressed": False})]:
        model = _model(km_dir, ["cpu"] * 4, **kwargs)
        try:
            out[name] = model.forward(
                input_ids=ids,
                attention_mask=torch.ones_like(ids),
                position_ids=torch.arange(ids.shape[1])[None],
                cache=model.new_cache(),
                phase="prefill",
                last_only=False,
            )
        finally:
            model.close()
    diff = (out["kernel"] - out["exact"]).abs().max().item()
    assert 0 < diff < 0.05 * out["exact"].abs().max().item()


def test_resident_kernel_layers_skip_the_copy_thread(km_dir: Path) -> None:
    model = _model(km_dir, ["cpu"] * 4)
    try:
        assert model.store.decode == "kernel"
        assert model.prefetcher is None  # no hand-off between threads per layer
        want = _greedy(model)
        model.apply_placement(make_placement(model_dir=km_dir, layer_tiers=["cpu", "disk"] * 2))
        assert model.prefetcher is not None
        assert _greedy(model) == want
    finally:
        model.close()


def test_the_executor_chooses_the_kernel_forms_on_a_cpu(km_dir: Path) -> None:
    sources = [index_checkpoint(km_dir)[layer_unit(0)]]
    cpu = torch.device("cpu")
    assert choose_decode(device=cpu, packed=sources, streamed_from_disk=True) == "kernel"
    assert choose_decode(device=cpu, packed=[], streamed_from_disk=True) == "matrix"
    assert choose_decode(device=cpu, packed=[], streamed_from_disk=False) == "layer"
    cuda = torch.device("cuda")
    assert choose_decode(device=cuda, packed=sources, streamed_from_disk=True) == "layer"


def test_an_embedding_on_the_disk_is_looked_up_in_the_files_mapping(km_dir: Path) -> None:
    """The planner sends a kernel-form model's embedding to the disk first: a lookup
    reads its rows from the file's mapping, so no copy thread fetches it per step."""
    resident = _model(km_dir, ["cpu"] * 4)
    on_disk = StreamingModel(
        model_dir=km_dir,
        placement=make_placement(model_dir=km_dir, layer_tiers=["cpu"] * 4, embed_tier="disk"),
        dtype=torch.float32,
    )
    try:
        assert _greedy(on_disk) == _greedy(resident)
        assert not on_disk.store.is_streamed(EMBED)
        assert on_disk.prefetcher is None and on_disk.store.stats().fetches == 0
        # Moved back by a new placement, it is the same mapping.
        on_disk.apply_placement(make_placement(model_dir=km_dir, layer_tiers=["cpu"] * 4))
        assert _greedy(on_disk) == _greedy(resident)
    finally:
        resident.close()
        on_disk.close()


def test_layers_streamed_from_the_disk_reuse_one_block_and_drop_their_pages(
    km_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each read of a streamed layer goes into a pooled block of the largest streamed
    layer's size, and its pages leave the page cache after (under a memory limit they
    would push out the resident units' mapped pages); resident units keep theirs."""
    from engine.runtime.executor import weights
    from engine.runtime.executor.packed import stored_bytes

    dropped: list[int] = []
    drop = weights.evict_ranges

    def recorded(sources: list) -> None:
        dropped.extend(s.start for s in sources)
        drop(sources)

    monkeypatch.setattr(weights, "evict_ranges", recorded)
    tiers = ["cpu", "disk", "cpu", "disk"]
    model = _model(km_dir, tiers)
    try:
        _greedy(model)
        units = index_checkpoint(km_dir)
        streamed = {s.start for i in (1, 3) for s in units[layer_unit(i)]}
        assert set(dropped) == streamed
        largest = max(sum(stored_bytes(s) for s in units[layer_unit(i)]) for i in (1, 3))
        stats = model.store.stats()
        # A streamed unit still lent out holds its block outside the pool (pooled_bytes
        # was 0 twice at load 6-10; a prefetch left in flight is the likely cause).
        blocks = stats.pooled_bytes + stats.streamed_live * largest
        assert stats.pooled_bytes % largest == 0 and 0 < blocks <= 3 * largest
    finally:
        model.close()
