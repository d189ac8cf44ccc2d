"""GGUF embedders: a random-weight nomic-bert file, written as llama.cpp's converter
writes one (fused q/k/v, f16 matrices, the "▁"-marked vocabulary), loaded by the
loading code users run and checked against transformers' own NomicBertModel."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from gguf import GGMLQuantizationType, GGUFWriter, PoolingType, TokenType
from gguf.quants import quantize

from engine.errors import EmbedderError
from engine.rag.ingest.embedder import Embedder, locate_embedder
from engine.rag.ingest.gguf_embedder import NOMIC_PROMPTS, gguf_embedder_folder

WORDS = [
    "the",
    "git",
    "rebase",
    "option",
    "empty",
    "drop",
    "keep",
    "what",
    "does",
    "search",
    "query",
    "document",
]
SUBWORDS = ["s", "ing", "ed", "_", ":", "-", "?", ",", "."]
SPECIALS = ["[PAD]", "[unused0]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def _vocab() -> list[str]:
    """llama.cpp's form of a WordPiece vocabulary: words marked with "▁", pieces bare."""
    return [*SPECIALS, *(f"\u2581{w}" for w in WORDS + SUBWORDS), *SUBWORDS]


def _model(*, layers: int = 2) -> torch.nn.Module:
    from transformers import NomicBertConfig, NomicBertModel

    torch.manual_seed(0)
    config = NomicBertConfig(
        vocab_size=len(_vocab()),
        hidden_size=64,
        num_hidden_layers=layers,
        num_attention_heads=4,
        intermediate_size=128,
        max_position_embeddings=128,
    )
    model = NomicBertModel(config).eval()
    with torch.no_grad():  # random norms too, so a swapped weight shows
        for name, p in model.named_parameters():
            if "LayerNorm" in name or "layernorm" in name:
                p.add_(torch.randn_like(p) * 0.2)
            # What the file holds: f16 matrices.
            if p.dim() == 2:
                p.copy_(p.half().float())
    return model


def _add_shape(writer: GGUFWriter, config: Any) -> None:
    """The hyperparameters llama.cpp's converter writes for an encoder."""
    writer.add_block_count(config.num_hidden_layers)
    writer.add_context_length(config.max_position_embeddings)
    writer.add_embedding_length(config.hidden_size)
    writer.add_feed_forward_length(config.intermediate_size)
    writer.add_head_count(config.num_attention_heads)
    writer.add_layer_norm_eps(config.layer_norm_eps)
    writer.add_causal_attention(False)


def _add_vocab(writer: GGUFWriter) -> None:
    writer.add_tokenizer_model("bert")
    vocab = _vocab()
    writer.add_token_list(vocab)
    writer.add_token_scores([0.0] * len(vocab))
    writer.add_token_types(
        [TokenType.CONTROL if v in SPECIALS else TokenType.NORMAL for v in vocab]
    )
    writer.add_unk_token_id(vocab.index("[UNK]"))
    writer.add_sep_token_id(vocab.index("[SEP]"))
    writer.add_pad_token_id(vocab.index("[PAD]"))
    writer.add_bos_token_id(vocab.index("[CLS]"))


def write_nomic_gguf(
    *,
    model: torch.nn.Module,
    out: Path,
    arch: str = "nomic-bert",
    matrices: GGMLQuantizationType = GGMLQuantizationType.F16,
) -> Path:
    config = model.config
    writer = GGUFWriter(str(out), arch)
    writer.add_name("test-nomic")
    _add_shape(writer, config)
    writer.add_rope_freq_base(config.rope_parameters["rope_theta"])
    _add_vocab(writer)
    state = {k: v.detach().float().numpy() for k, v in model.state_dict().items()}

    def add(name: str, values: np.ndarray) -> None:
        # As llama.cpp: norms and biases float32, matrices in the file's type.
        kind = matrices if values.ndim == 2 else GGMLQuantizationType.F32
        data = quantize(values.astype(np.float32), kind)
        writer.add_tensor(name, data, raw_shape=data.shape, raw_dtype=kind)

    add("token_embd.weight", state["embeddings.word_embeddings.weight"])
    add("token_types.weight", state["embeddings.token_type_embeddings.weight"])
    add("token_embd_norm.weight", state["embeddings.LayerNorm.weight"])
    add("token_embd_norm.bias", state["embeddings.LayerNorm.bias"])
    for i in range(config.num_hidden_layers):
        p = f"layers.{i}."
        qkv = [state[f"{p}self_attn.{x}_proj.weight"] for x in "qkv"]
        add(f"blk.{i}.attn_qkv.weight", np.concatenate(qkv, axis=0))
        add(f"blk.{i}.attn_output.weight", state[f"{p}self_attn.o_proj.weight"])
        add(f"blk.{i}.ffn_up.weight", state[f"{p}mlp.up_proj.weight"])
        add(f"blk.{i}.ffn_gate.weight", state[f"{p}mlp.gate_proj.weight"])
        add(f"blk.{i}.ffn_down.weight", state[f"{p}mlp.down_proj.weight"])
        for gguf_name, hf in (
            ("attn_output_norm", "post_attention_layernorm"),
            ("layer_output_norm", "post_mlp_layernorm"),
        ):
            add(f"blk.{i}.{gguf_name}.weight", state[f"{p}{hf}.weight"])
            add(f"blk.{i}.{gguf_name}.bias", state[f"{p}{hf}.bias"])
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return out


def _bert_model() -> torch.nn.Module:
    from transformers import BertConfig, BertModel

    torch.manual_seed(1)
    config = BertConfig(
        vocab_size=len(_vocab()),
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=128,
        max_position_embeddings=64,
    )
    model = BertModel(config, add_pooling_layer=False).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.05)  # biases and norms off their defaults
            if p.dim() == 2:
                p.copy_(p.half().float())
    return model


_BERT_NAMES = {
    "attention.self.query": "attn_q",
    "attention.self.key": "attn_k",
    "attention.self.value": "attn_v",
    "attention.output.dense": "attn_output",
    "attention.output.LayerNorm": "attn_output_norm",
    "intermediate.dense": "ffn_up",
    "output.dense": "ffn_down",
    "output.LayerNorm": "layer_output_norm",
    "embeddings.word_embeddings": "token_embd",
    "embeddings.position_embeddings": "position_embd",
    "embeddings.token_type_embeddings": "token_types",
    "embeddings.LayerNorm": "token_embd_norm",
}


def write_bert_gguf(*, model: torch.nn.Module, out: Path, pooling: int = 1) -> Path:
    """As convert_hf_to_gguf.py writes a BERT sentence embedder (all-MiniLM, bge)."""
    config = model.config
    writer = GGUFWriter(str(out), "bert")
    _add_shape(writer, config)
    writer.add_pooling_type(PoolingType(pooling))
    _add_vocab(writer)
    for name, value in model.state_dict().items():
        stem, _, kind = name.rpartition(".")
        match = re.match(r"encoder\.layer\.(\d+)\.(.+)$", stem)
        gguf = f"blk.{match[1]}.{_BERT_NAMES[match[2]]}" if match else _BERT_NAMES[stem]
        values = value.detach().float().numpy()
        qtype = GGMLQuantizationType.F16 if values.ndim == 2 else GGMLQuantizationType.F32
        data = quantize(values, qtype)
        writer.add_tensor(f"{gguf}.{kind}", data, raw_shape=data.shape, raw_dtype=qtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return out


def _reference(model: torch.nn.Module, ids: list[int], *, cls: bool = False) -> np.ndarray:
    """transformers' model, mean- (or CLS-) pooled and normalised, on word-piece ids."""
    with torch.no_grad():
        hidden = model(input_ids=torch.tensor([ids])).last_hidden_state[0]
    out = hidden[0] if cls else hidden.mean(dim=0)
    return (out / out.norm()).numpy()


@pytest.fixture(scope="module")
def nomic(tmp_path_factory: pytest.TempPathFactory) -> tuple[torch.nn.Module, Path]:
    model = _model()
    return model, write_nomic_gguf(model=model, out=tmp_path_factory.mktemp("g") / "n.gguf")


def test_the_vocabulary_is_wordpiece_again(nomic, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from transformers import AutoTokenizer

    folder = gguf_embedder_folder(gguf_path=nomic[1], cache=tmp_path)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    vocab = _vocab()
    # "keeping": a word and a continuation; "Git" lower-cased; "zzz" unknown.
    pieces = tokenizer.tokenize("Git keeping, zzz")
    assert pieces == ["git", "keep", "##ing", ",", "[UNK]"]
    ids = tokenizer("the option")["input_ids"]
    assert ids == [vocab.index(t) for t in ("[CLS]", "▁the", "▁option", "[SEP]")]


def test_vectors_are_those_of_transformers_own_model(nomic, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from sentence_transformers import SentenceTransformer

    model, path = nomic
    folder = gguf_embedder_folder(gguf_path=path, cache=tmp_path)
    loaded = SentenceTransformer(str(folder), device="cpu")
    text = "what does the empty option drop?"
    ids = loaded.tokenizer(text)["input_ids"]
    got = loaded.encode([text], normalize_embeddings=True)[0]
    np.testing.assert_allclose(got, _reference(model, ids), atol=1e-5)
    assert loaded.prompts["query"] == NOMIC_PROMPTS["query"]


def test_a_q8_0_file_gives_nearly_the_f16_vectors(  # type: ignore[no-untyped-def]
    nomic, tmp_path: Path
) -> None:
    from sentence_transformers import SentenceTransformer

    model, path = nomic
    q8 = write_nomic_gguf(model=model, out=tmp_path / "q8.gguf", matrices=GGMLQuantizationType.Q8_0)
    assert q8.stat().st_size < path.stat().st_size
    texts = ["what does the empty option drop?", "git rebase keeps the option"]
    vectors = [
        SentenceTransformer(
            str(gguf_embedder_folder(gguf_path=p, cache=tmp_path)), device="cpu"
        ).encode(texts, normalize_embeddings=True)
        for p in (path, q8)
    ]
    cosines = (vectors[0] * vectors[1]).sum(axis=1)
    assert cosines.min() > 0.99, cosines


def test_the_embedder_prefixes_questions_and_documents(  # type: ignore[no-untyped-def]
    nomic, ragdoll_home: Path
) -> None:
    model, path = nomic
    embedder = Embedder(model=str(path), device="cpu", backend="torch")
    assert embedder.info.dimension == 64 and embedder.info.id == str(path)
    tokenizer = embedder.tokenizer
    text = "what does rebase keep?"
    query = embedder.embed([text])[0]
    document = embedder.embed([text], background=True)[0]
    for prefix, got in (("search_query: ", query), ("search_document: ", document)):
        ids = tokenizer(prefix + text)["input_ids"]
        np.testing.assert_allclose(got, _reference(model, ids), atol=1e-5)
    assert float(query @ document) < 0.9999


def test_the_folder_is_made_once_in_the_apps_cache(  # type: ignore[no-untyped-def]
    nomic, ragdoll_home: Path
) -> None:
    folder = Path(locate_embedder(str(nomic[1])))
    assert ragdoll_home in folder.parents
    made = (folder / "model.safetensors").stat().st_mtime_ns
    assert Path(locate_embedder(str(nomic[1]))) == folder
    assert (folder / "model.safetensors").stat().st_mtime_ns == made
    assert not [p for p in folder.parent.iterdir() if ".tmp" in p.name]


def test_another_architecture_is_refused_by_name(tmp_path: Path) -> None:
    path = write_nomic_gguf(model=_model(layers=1), out=tmp_path / "b.gguf", arch="t5encoder")
    with pytest.raises(EmbedderError, match="'t5encoder'"):
        gguf_embedder_folder(gguf_path=path, cache=tmp_path / "cache")
    assert not list((tmp_path / "cache" / "gguf-embedders").iterdir())


def test_a_truncated_file_is_a_clear_error(nomic, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(nomic[1].read_bytes()[:5000])
    with pytest.raises(EmbedderError, match=r"cut\.gguf"):
        gguf_embedder_folder(gguf_path=cut, cache=tmp_path / "cache")
    with pytest.raises(EmbedderError, match=r"could not load|cut\.gguf"):
        Embedder(model=str(cut), device="cpu", backend="torch")


def test_a_file_that_is_gone_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(EmbedderError, match=r"gone\.gguf"):
        gguf_embedder_folder(gguf_path=tmp_path / "gone.gguf", cache=tmp_path / "cache")


@pytest.mark.parametrize("pooling", [1, 2])
def test_a_bert_file_gives_bert_model_vectors(tmp_path: Path, pooling: int) -> None:
    from sentence_transformers import SentenceTransformer

    model = _bert_model()
    path = write_bert_gguf(model=model, out=tmp_path / "bert.gguf", pooling=pooling)
    folder = gguf_embedder_folder(gguf_path=path, cache=tmp_path / "cache")
    loaded = SentenceTransformer(str(folder), device="cpu")
    assert not any(loaded.prompts.values())  # BERT embedders: no task prefixes
    text = "what does the option keep?"
    ids = loaded.tokenizer(text)["input_ids"]
    got = loaded.encode([text], normalize_embeddings=True)[0]
    np.testing.assert_allclose(got, _reference(model, ids, cls=pooling == 2), atol=1e-5)


def test_a_language_model_is_pointed_to_the_model_menu(tmp_path: Path) -> None:
    path = write_nomic_gguf(model=_model(layers=1), out=tmp_path / "chat.gguf", arch="llama")
    with pytest.raises(EmbedderError, match=r"language model .*ragdoll model"):
        gguf_embedder_folder(gguf_path=path, cache=tmp_path / "cache")


def test_an_embedder_chosen_as_the_language_model_is_pointed_to_the_embedder(
    tmp_path: Path,
) -> None:
    from engine.errors import ModelLoadError
    from engine.runtime.models.gguf_file import read_gguf

    path = write_bert_gguf(model=_bert_model(), out=tmp_path / "bge.gguf")
    with pytest.raises(ModelLoadError, match=r"embedding model .*ragdoll embedder"):
        read_gguf(path)
