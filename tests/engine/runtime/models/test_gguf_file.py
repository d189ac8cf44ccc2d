"""GGUF files as models: a random-weight Llama/Qwen2 written as GGUF loads through the
same resolution and executor users run, its tokenizer matches the Hugging Face one, its
greedy tokens match transformers run on the dequantized weights, and files the executor
cannot run are refused with a clear message."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType, GGUFReader, GGUFWriter
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

from engine.errors import EngineRequestError, ModelLoadError
from engine.rag.answer.in_use import open_model
from engine.runtime.executor import ggml_native
from engine.runtime.executor.compat import GenerateCompat
from engine.runtime.executor.forward import StreamingModel
from engine.runtime.models.gguf_file import permute_rows, read_gguf, read_tensor
from engine.runtime.models.gguf_writer import write_gguf
from engine.runtime.models.resolve import display_name, resolve_model_path
from engine.runtime.models.synthetic import write_random_model
from tests.support.engine import RunningEngine

MESSAGES = [{"role": "user", "content": "When is the honey extracted?"}]


@pytest.fixture(autouse=True)
def _home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAGDOLL_HOME", str(tmp_path / "home"))


@pytest.mark.parametrize(
    ("architecture", "qtype"),
    [("qwen2", GGMLQuantizationType.Q8_0), ("llama", GGMLQuantizationType.Q4_0)],
)
def test_gguf_greedy_tokens_match_transformers_on_dequantized_weights(
    tmp_path: Path, architecture: str, qtype: GGMLQuantizationType
) -> None:
    hf = write_random_model(folder=tmp_path / architecture, architecture=architecture)
    gguf_path = write_gguf(model_dir=hf, out=tmp_path / f"{architecture}.gguf", qtype=qtype)

    folder = resolve_model_path(model=str(gguf_path))
    assert display_name(model_path=folder) == gguf_path.name
    assert resolve_model_path(model=str(gguf_path)) == folder  # made once, reused
    # The tokenizer files are those AutoTokenizer makes of the file (the folder names the
    # class itself rather than let AutoTokenizer rebuild the whole config first).
    auto = tmp_path / "auto"
    AutoTokenizer.from_pretrained(
        gguf_path.parent, gguf_file=gguf_path.name, local_files_only=True
    ).save_pretrained(auto)
    for made in auto.iterdir():
        assert made.read_bytes() == (folder / made.name).read_bytes(), made.name

    original = AutoTokenizer.from_pretrained(hf)
    rebuilt = AutoTokenizer.from_pretrained(folder)
    prompt = rebuilt.apply_chat_template(MESSAGES, add_generation_prompt=True, tokenize=False)
    assert prompt == original.apply_chat_template(
        MESSAGES, add_generation_prompt=True, tokenize=False
    )
    ids = rebuilt(prompt, add_special_tokens=False).input_ids
    generation = json.loads((folder / "generation_config.json").read_text(encoding="utf-8"))
    assert generation["eos_token_id"] == [original.eos_token_id]
    assert ids == original(prompt, add_special_tokens=False).input_ids

    model = read_gguf(gguf_path)
    reference = AutoModelForCausalLM.from_config(
        AutoConfig.from_pretrained(folder), dtype=torch.float32
    )
    with gguf_path.open("rb") as f:
        state = {t.name: read_tensor(f, t, dtype=torch.float32) for t in model.tensors}
    loaded = reference.load_state_dict(state, strict=False)
    assert not loaded.unexpected_keys
    assert set(loaded.missing_keys) <= {"lm_head.weight"}  # tied to the embedding
    reference.tie_weights()
    # The permuted Llama q rows came back in Hugging Face order: only quantization
    # error separates them from the original weights.
    original_q = AutoModelForCausalLM.from_pretrained(hf, dtype=torch.float32).state_dict()[
        "model.layers.0.self_attn.q_proj.weight"
    ]
    assert (state["model.layers.0.self_attn.q_proj.weight"] - original_q).abs().max() < 0.05

    inputs = torch.tensor([ids])
    expected = reference.generate(inputs, max_new_tokens=10, do_sample=False)
    in_use = open_model(model_path=folder, device="cpu")
    assert isinstance(in_use.answerer.model, GenerateCompat)
    got = in_use.answerer.model.generate(input_ids=inputs, max_new_tokens=10)
    assert got[0, inputs.shape[1] :].tolist() == expected[0, inputs.shape[1] :].tolist()


def test_gguf_weights_stay_in_the_file(tmp_path: Path) -> None:
    hf = write_random_model(folder=tmp_path / "m", architecture="qwen2")
    gguf_path = write_gguf(model_dir=hf, out=tmp_path / "m.gguf", qtype=GGMLQuantizationType.Q4_0)
    folder = resolve_model_path(model=str(gguf_path))
    assert not list(folder.glob("*.safetensors"))
    model = read_gguf(gguf_path)
    q4 = [t for t in model.tensors if t.qtype == GGMLQuantizationType.Q4_0]
    assert q4 and all((t.end - t.start) * 8 < 4 * 4 * np.prod(t.shape) for t in q4)


def test_gguf_in_hugging_face_cache_is_found(tmp_path: Path) -> None:
    hf = write_random_model(folder=tmp_path / "m", architecture="llama")
    snapshot = tmp_path / "hub" / "models--someone--tiny-GGUF" / "snapshots" / "abc"
    snapshot.mkdir(parents=True)
    for name, qtype in (
        ("tiny.Q8_0.gguf", GGMLQuantizationType.Q8_0),
        ("tiny.Q4_0.gguf", GGMLQuantizationType.Q4_0),
    ):
        write_gguf(model_dir=hf, out=snapshot / name, qtype=qtype)
    folder = resolve_model_path(model="someone/tiny-GGUF", cache_dir=tmp_path / "hub")
    assert display_name(model_path=folder) == "tiny.Q4_0.gguf"  # the 4-bit file first


def _minimal_gguf(path: Path, *, arch: str, qtype: GGMLQuantizationType) -> Path:
    writer = GGUFWriter(str(path), arch)
    writer.add_embedding_length(32)
    writer.add_block_count(1)
    writer.add_head_count(4)
    if qtype == GGMLQuantizationType.F32:
        writer.add_tensor("token_embd.weight", np.zeros((16, 32), dtype=np.float32))
    else:
        per_block, size = GGML_QUANT_SIZES[qtype]
        raw = np.zeros((16, 32 // per_block * size), dtype=np.uint8)
        writer.add_tensor("token_embd.weight", raw, raw_shape=raw.shape, raw_dtype=qtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def test_unsupported_architecture_is_refused(tmp_path: Path) -> None:
    path = _minimal_gguf(tmp_path / "x.gguf", arch="gpt2", qtype=GGMLQuantizationType.F32)
    with pytest.raises(ModelLoadError, match="gpt2 model; RAGDoll runs GGUF models of"):
        resolve_model_path(model=str(path))


def test_unknown_quant_type_is_refused(tmp_path: Path) -> None:
    path = _minimal_gguf(tmp_path / "x.gguf", arch="llama", qtype=GGMLQuantizationType.Q8_1)
    with pytest.raises(ModelLoadError, match="Q8_1, a GGML type RAGDoll cannot decode"):
        resolve_model_path(model=str(path))


def test_truncated_file_is_refused(tmp_path: Path) -> None:
    hf = write_random_model(folder=tmp_path / "m", architecture="qwen2")
    path = write_gguf(model_dir=hf, out=tmp_path / "m.gguf", qtype=GGMLQuantizationType.Q8_0)
    data = path.read_bytes()
    for keep in (len(data) - 1000, len(data) // 2, 200):
        cut = tmp_path / f"cut{keep}.gguf"
        cut.write_bytes(data[:keep])
        with pytest.raises(ModelLoadError, match=rf"cut{keep}.gguf is truncated"):
            resolve_model_path(model=str(cut))
    cut = tmp_path / "cut3.gguf"
    cut.write_bytes(data[:3])
    with pytest.raises(ModelLoadError, match="is not a GGUF file"):
        resolve_model_path(model=str(cut))


def test_ragdoll_model_gguf_answers_through_the_engine(
    engine: RunningEngine, tmp_path: Path
) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "bees.md").write_text(
        "# Apiary\n\nThe hives are inspected every Saturday morning. The honey is "
        "extracted in late August and stored in the cellar.\n"
    )
    assert engine.ingest(notes).state == "done"
    hf = write_random_model(folder=tmp_path / "tiny-qwen", architecture="qwen2")
    gguf_path = write_gguf(
        model_dir=hf, out=tmp_path / "tiny-qwen.Q4_0.gguf", qtype=GGMLQuantizationType.Q4_0
    )

    result = engine.ragdoll("model", str(gguf_path))
    assert result.returncode == 0, result.stderr
    answer = engine.client.ask(question="When is the honey extracted?")
    assert answer.mode == "generative"
    assert answer.model and "tiny-qwen.Q4_0.gguf" in answer.model
    assert answer.citations and answer.citations[0].path.endswith("bees.md")

    bad = _minimal_gguf(tmp_path / "other.gguf", arch="gpt2", qtype=GGMLQuantizationType.F32)
    with pytest.raises(EngineRequestError) as refused:
        engine.client.set_model(model=str(bad))
    assert refused.value.status == 400
    assert "gpt2" in str(refused.value)
    assert engine.client.settings().model == str(gguf_path)  # the old choice stands


def _random_k_blocks(data: np.ndarray, qtype: GGMLQuantizationType) -> np.ndarray:
    """Valid K-quant blocks with random contents and small scales, in the shape
    `gguf.quants.quantize` returns (gguf 0.19 cannot quantize to Q4_K or Q6_K)."""
    per_block, size = GGML_QUANT_SIZES[qtype]
    rows = data.shape[0]
    n = rows * data.shape[1] // per_block
    rng = np.random.default_rng(data.size)
    raw = rng.integers(0, 256, size=(n, size), dtype=np.uint8)
    halves = [(0, 2), (2, 4)] if qtype == GGMLQuantizationType.Q4_K else [(size - 2, size)]
    for start, end in halves:
        raw[:, start:end] = (
            rng.uniform(1e-4, 4e-4, n).astype(np.float16).view(np.uint8).reshape(n, 2)
        )
    return raw.reshape(rows, -1)


def test_q4_k_m_file_reads_bit_exact_to_gguf_reference(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Q4_K_M-shaped file (Q4_K, attn_v and ffn_down in Q6_K) decoded by the executor
    gives the greedy tokens of transformers on weights decoded by gguf's own numpy
    dequantizer; computed in its kernel forms, as the product does, the same tokens."""
    from gguf.quants import dequantize as reference_dequantize

    from engine.runtime.models import gguf_writer

    hf = write_random_model(
        folder=tmp_path / "k",
        architecture="llama",
        hidden_size=256,
        num_heads=4,
        num_kv_heads=2,
        intermediate_size=512,
    )
    monkeypatch.setattr(gguf_writer, "quantize", _random_k_blocks)

    def qtype_of(name: str) -> GGMLQuantizationType:
        if "attn_v" in name or "ffn_down" in name:
            return GGMLQuantizationType.Q6_K
        return GGMLQuantizationType.Q4_K

    gguf_path = write_gguf(
        model_dir=hf,
        out=tmp_path / "k.Q4_K_M.gguf",
        qtype=GGMLQuantizationType.Q4_K,
        qtype_of=qtype_of,
    )
    folder = resolve_model_path(model=str(gguf_path))
    model = read_gguf(gguf_path)
    assert {t.qtype.name for t in model.tensors} == {"Q4_K", "Q6_K", "F32"}

    reader = GGUFReader(gguf_path)
    state = {}
    for t in reader.tensors:
        values = reference_dequantize(np.array(t.data), t.tensor_type).astype(np.float32)
        shape = tuple(int(d) for d in reversed(t.shape.tolist()))
        values = torch.from_numpy(values.reshape(shape))
        ours = next(x for x in model.tensors if x.gguf_name == t.name)
        if ours.permute_heads:
            values = permute_rows(values, heads=ours.permute_heads, inverse=True)
        state[ours.name] = values
    reference = AutoModelForCausalLM.from_config(
        AutoConfig.from_pretrained(folder), dtype=torch.float32
    )
    reference.load_state_dict(state, strict=False)
    reference.tie_weights()

    inputs = torch.tensor([[1, 40, 41, 42, 43, 44]])
    expected = reference.generate(inputs, max_new_tokens=8, do_sample=False)
    # Decoded once to float32 (the exact reading): transformers' tokens bit for bit.
    placement = open_model(model_path=folder, device="cpu").owner.placement
    exact = StreamingModel(model_dir=folder, placement=placement, compressed=False)
    try:
        got = GenerateCompat(model=exact).generate(input_ids=inputs, max_new_tokens=8)
        assert got[0, 6:].tolist() == expected[0, 6:].tolist()
    finally:
        exact.close()
    # Computed in torch's kernel forms of the same blocks (Q6_K requantized to int8); the
    # native form on the blocks as stored has its own tests (test_ggml_native.py).
    monkeypatch.setenv(ggml_native.FORCE_TORCH_ENV, "1")
    in_use = open_model(model_path=folder, device="cpu")
    executor = in_use.answerer.model.executor
    held = executor.store.resident("layer.0")
    assert "self_attn.v_proj.weight:int8" in held and "mlp.gate_up_proj.weight:int4" in held
    got = in_use.answerer.model.generate(input_ids=inputs, max_new_tokens=8)
    assert got[0, 6:].tolist() == expected[0, 6:].tolist()
    in_use.close()


def test_llama3_rope_scaling_comes_back_from_rope_freqs(tmp_path: Path) -> None:
    hf = write_random_model(folder=tmp_path / "l3", architecture="llama")
    config_file = hf / "config.json"
    config = json.loads(config_file.read_text(encoding="utf-8"))
    config["rope_theta"] = 500000.0
    config["rope_scaling"] = {
        "rope_type": "llama3",
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 8192,
    }
    config_file.write_text(json.dumps(config), encoding="utf-8")
    gguf_path = write_gguf(model_dir=hf, out=tmp_path / "l3.gguf", qtype=GGMLQuantizationType.F32)

    # Only the config says it: at this size the scaling moves logits by ~1e-3 and
    # leaves the greedy tokens as they are.
    assert read_gguf(gguf_path).config["rope_scaling"] == config["rope_scaling"]

    inputs = torch.tensor([[1, 40, 41, 42, 43, 44]])
    original = AutoModelForCausalLM.from_pretrained(hf, dtype=torch.float32)
    expected = original.generate(inputs, max_new_tokens=8, do_sample=False)
    in_use = open_model(model_path=resolve_model_path(model=str(gguf_path)), device="cpu")
    got = in_use.answerer.model.generate(input_ids=inputs, max_new_tokens=8)
    assert got[0, 6:].tolist() == expected[0, 6:].tolist()


def test_a_sentencepiece_vocabulary_keeps_the_space_before_text(tmp_path: Path) -> None:
    """Llama 2 and Mistral GGUF files hold a SentencePiece vocabulary, which puts "▁"
    before the text as the models' own tokenizers do: " Hello" is "▁" then "▁H…", not
    "Hello" with its space lost (transformers' rebuild alone gave 32 of llama.cpp's 47
    test strings the Hugging Face ids; this gives 47)."""
    from gguf import TokenType

    tokens = ["<unk>", "<s>", "</s>", "▁", "▁H", "▁w", "He", "ll", "o", "H", "e", "l"]
    tokens += ["w", "r", "d", "or", "ld"]
    types = [TokenType.UNKNOWN, TokenType.CONTROL, TokenType.CONTROL]
    types += [TokenType.NORMAL] * (len(tokens) - 3)
    path = tmp_path / "spm.gguf"
    writer = GGUFWriter(str(path), "llama")
    writer.add_embedding_length(32)
    writer.add_block_count(1)
    writer.add_head_count(4)
    writer.add_tokenizer_model("llama")
    writer.add_token_list(tokens)
    writer.add_token_scores([-float(i) for i in range(len(tokens))])
    writer.add_token_types(types)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_unk_token_id(0)
    writer.add_tensor("token_embd.weight", np.zeros((len(tokens), 32), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()

    tokenizer = AutoTokenizer.from_pretrained(resolve_model_path(model=str(path)))

    def pieces(text: str) -> list[str]:
        ids = tokenizer(text, add_special_tokens=False).input_ids
        assert tokenizer.decode(ids) == text
        return tokenizer.convert_ids_to_tokens(ids)

    assert pieces("Hello world")[:2] == ["▁H", "e"]
    assert pieces(" Hello")[:2] == ["▁", "▁H"]
    assert pieces("  Hello world")[:3] == ["▁", "▁", "▁H"]
