"""A plain sentence-transformers model read from its folder's files, as the library
reads it, and an exported embedder that starts without the library."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from engine.errors import LoadStopped
from engine.rag.ingest.embedder import Embedder, locate_embedder
from engine.rag.ingest.plain_model import plain_model_of, read_plain_model
from tests.support.tiny_embedder import write_random_embedder

_REPO = Path(__file__).resolve().parents[4]


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_random_embedder(tmp_path_factory.mktemp("models") / "tiny", hidden=32)


@pytest.mark.parametrize("which", ["tiny", "bundled"])
def test_the_files_say_what_the_loaded_model_says(tiny_model: Path, which: str) -> None:
    from sentence_transformers import SentenceTransformer

    location = str(tiny_model) if which == "tiny" else locate_embedder("all-MiniLM-L6-v2")
    read = read_plain_model(location)
    loaded = plain_model_of(SentenceTransformer(location, device="cpu"), location=location)
    assert read is not None and loaded is not None
    assert (read.pooling, read.max_tokens, read.dimension) == (
        loaded.pooling,
        loaded.max_tokens,
        loaded.dimension,
    )
    assert {k: v for k, v in read.prompts if v} == {k: v for k, v in loaded.prompts if v}


def _edited(tiny_model: Path, tmp_path: Path, *, file: str, change: dict) -> str:
    folder = tmp_path / "edited"
    subprocess.run(["cp", "-r", str(tiny_model), str(folder)], check=True)
    path = folder / file
    data = json.loads(path.read_text()) if path.exists() else {}
    if isinstance(data, list):
        data = [*data, change]
    else:
        data.update(change)
    path.write_text(json.dumps(data))
    return str(folder)


@pytest.mark.parametrize(
    ("file", "change"),
    [
        ("modules.json", {"idx": 9, "name": "9", "path": "9_Dense", "type": "x.Dense"}),
        ("config_sentence_transformers.json", {"default_prompt_name": "query"}),
        ("sentence_bert_config.json", {"do_lower_case": True}),
        ("1_Pooling/config.json", {"pooling_mode": "max"}),
        ("sentence_bert_config.json", {"transformer_task": "fill-mask"}),
    ],
)
def test_a_model_the_files_do_not_fully_describe_goes_through_the_library(
    tiny_model: Path, tmp_path: Path, file: str, change: dict
) -> None:
    assert read_plain_model(_edited(tiny_model, tmp_path, file=file, change=change)) is None


def test_a_missing_file_goes_through_the_library(tiny_model: Path, tmp_path: Path) -> None:
    folder = _edited(tiny_model, tmp_path, file="sentence_bert_config.json", change={})
    (Path(folder) / "sentence_bert_config.json").unlink()
    assert read_plain_model(folder) is None


def test_an_exported_embedder_starts_without_the_library(tiny_model: Path, tmp_path: Path) -> None:
    """Once exported (and torch's probe vectors kept), a start reads the folder's files:
    sentence_transformers, 11 s of a loaded machine, is not imported."""
    first = Embedder(model=str(tiny_model), device="cpu", cache_dir=tmp_path, backend="onnx")
    assert first.backend == "onnx" and list(tmp_path.glob("*.probes.npz"))
    code = (
        "import sys\n"
        "from pathlib import Path\n"
        "from engine.rag.ingest.embedder import Embedder\n"
        f"e = Embedder(model={str(tiny_model)!r}, device='cpu', cache_dir=Path({str(tmp_path)!r}),"
        " backend='onnx')\n"
        "print(e.backend, e.info.dimension, e.info.max_tokens, e.embed(['owls']).shape,"
        " 'sentence_transformers' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=_REPO
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [
        "onnx",
        str(first.info.dimension),
        str(first.info.max_tokens),
        "(1,",
        f"{first.info.dimension})",
        "False",
    ]


def test_a_stopped_load_ends_between_its_steps(tiny_model: Path, tmp_path: Path) -> None:
    with pytest.raises(LoadStopped):
        Embedder(model=str(tiny_model), device="cpu", cache_dir=tmp_path, stop=lambda: True)
    assert not list(tmp_path.glob("*.onnx"))  # stopped before any export began


def test_the_bundled_tokenizer_loads_as_autotokenizer_would_without_torch() -> None:
    """The class the folder names, as AutoTokenizer would choose it, gives the same
    ids and offsets; and torch is not imported for it (AutoTokenizer imports it)."""
    from transformers import AutoTokenizer

    from engine.rag.ingest.plain_model import load_tokenizer

    plain = read_plain_model(locate_embedder("all-MiniLM-L6-v2"))
    assert plain is not None
    named = load_tokenizer(plain)
    auto = AutoTokenizer.from_pretrained(plain.tokenizer_folder, model_max_length=plain.max_tokens)
    texts = ["How does apt-get update work?", "Wie sorge ich für Sicherheitsupdates?", "x" * 900]
    for kw in ({}, {"add_special_tokens": False, "return_offsets_mapping": True}):
        assert named(texts, **kw).data == auto(texts, **kw).data
    assert named.model_max_length == auto.model_max_length == plain.max_tokens
    code = (
        "import sys\n"
        "from engine.rag.ingest.embedder import locate_embedder\n"
        "from engine.rag.ingest.plain_model import load_tokenizer, read_plain_model\n"
        "load_tokenizer(read_plain_model(locate_embedder('all-MiniLM-L6-v2')))\n"
        "print('torch' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=_REPO
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False"]
