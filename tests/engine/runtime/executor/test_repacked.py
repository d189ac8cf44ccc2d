"""Q4_0 layers streamed from the disk are repacked for the int4 kernel once into the cache
folder and read from there (engine/runtime/executor/repacked.py): written once, reused, never
used stale or partial, and the same greedy tokens as repacking at every use."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest
import torch
from gguf import GGMLQuantizationType

from engine.runtime.executor import int4, repacked
from engine.runtime.executor.checkpoint import HEAD, layer_unit
from engine.runtime.executor.forward import StreamingModel
from engine.runtime.executor.generate import GenerationRequest, generate_ids
from engine.runtime.models.gguf_file import companion_folder
from engine.runtime.models.gguf_writer import write_gguf
from engine.runtime.models.synthetic import write_random_model
from tests.engine.runtime.executor.conftest import make_placement

pytestmark = pytest.mark.skipif(not int4.available(), reason="torch has no CPU int4 kernel")

PROMPTS = [(1, 40, 41, 42, 43, 44, 45, 46), (1, 50, 51, 52)]
TIERS = ["cpu", "disk", "disk", "disk"]


@pytest.fixture(scope="module")
def q4_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("repacked")
    hf = write_random_model(
        folder=tmp / "hf",
        architecture="llama",  # q/k rows permuted in the GGUF: put back when repacking
        hidden_size=256,
        num_layers=4,
        num_heads=4,
        num_kv_heads=2,
        intermediate_size=512,
        vocab_size=832,  # rows in tiles of 64: the head takes the int4 form too
        seed=11,
    )
    path = write_gguf(model_dir=hf, out=tmp / "model.gguf", qtype=GGMLQuantizationType.Q4_0)
    return companion_folder(gguf_path=path, cache=tmp / "cache")


class _Repacks:
    """Counts int4.repack calls (one per Q4_0 matrix repacked)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls = 0
        real = int4.repack

        def counted(*args, **kwargs):  # type: ignore[no-untyped-def]
            self.calls += 1
            return real(*args, **kwargs)

        monkeypatch.setattr(int4, "repack", counted)


def _model(q4_dir: Path, *, cache: Path | None) -> StreamingModel:
    return StreamingModel(
        model_dir=q4_dir,
        placement=make_placement(model_dir=q4_dir, layer_tiers=TIERS),
        dtype=torch.float32,
        decode="kernel",
        repack_cache=cache,
    )


def _greedy(model: StreamingModel) -> list[list[int]]:
    requests = [GenerationRequest(prompt_ids=p, max_new_tokens=6) for p in PROMPTS]
    return generate_ids(model=model, requests=requests)


def _files(cache: Path) -> list[Path]:
    return sorted(cache.glob("*.int4"))


def test_written_once_then_streamed_without_repacking(
    q4_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repacks = _Repacks(monkeypatch)
    per_use = _model(q4_dir, cache=None)
    try:
        want = _greedy(per_use)
        assert per_use.store.repacked is None
    finally:
        per_use.close()
    assert repacks.calls > 0  # the old path repacks in the copy thread

    cache = tmp_path / "int4"
    first = _model(q4_dir, cache=cache)
    try:
        assert len(_files(cache)) == 1
        made = repacks.calls
        assert _greedy(first) == want
        # Decoding streamed every disk layer many times: none was repacked again.
        assert repacks.calls == made
        assert first.store.stats().fetches > 3
    finally:
        first.close()

    before = repacks.calls
    second = _model(q4_dir, cache=cache)
    try:
        assert repacks.calls == before  # the file is reused: nothing repacked at load
        assert second.store.repacked is not None
        assert _greedy(second) == want
        assert repacks.calls == before
        assert len(_files(cache)) == 1
    finally:
        second.close()


def test_the_file_is_as_small_as_the_q4_0_blocks(q4_dir: Path, tmp_path: Path) -> None:
    model = _model(q4_dir, cache=tmp_path)
    try:
        file = model.store.repacked
        assert file is not None
        for unit in [layer_unit(1), HEAD]:
            stored = sum(s.end - s.start for s in model.store.sources_of(unit))
            # Nibbles and bf16 scales only (the zeros are rebuilt at read): the stored
            # Q4_0 bytes, not the kernel's 0.625 bytes a weight.
            assert file.bytes_of(unit) == stored
        assert not list(tmp_path.glob("*.tmp"))  # no temporary left behind
    finally:
        model.close()


def test_a_stale_or_partial_file_is_not_used(
    q4_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = _model(q4_dir, cache=tmp_path)
    model.close()
    (good,) = _files(tmp_path)
    size = good.stat().st_size

    # Cut short (a crash mid-copy, a full disk): detected at open and written again.
    with good.open("r+b") as f:
        f.truncate(size // 2)
    repacks = _Repacks(monkeypatch)
    model = _model(q4_dir, cache=tmp_path)
    try:
        assert repacks.calls > 0 and model.store.repacked is not None
        assert good.stat().st_size == size
    finally:
        model.close()

    # A file with another key (another torch, layout or model) is not read as this one.
    other = repacked.open_file(good, key="0" * 20)
    assert other is None
    # A changed model file gives another key, hence another file.
    (gguf,) = model.store.files
    stat = gguf.stat()
    os.utime(gguf, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    try:
        model = _model(q4_dir, cache=tmp_path)
        model.close()
        # ... and the superseded one, as large as the model, is deleted.
        (new,) = _files(tmp_path)
        assert new != good and not good.exists()
    finally:
        os.utime(gguf, ns=(stat.st_atime_ns, stat.st_mtime_ns))


def test_disk_full_falls_back_to_repacking_per_use(
    q4_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def full(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(repacked, "_write", full)
    with caplog.at_level(logging.WARNING, logger="engine.runtime.executor.repacked"):
        model = _model(q4_dir, cache=tmp_path)
    try:
        assert model.store.repacked is None
        assert "repacking each streamed layer in the copy thread" in caplog.text
        assert not list(tmp_path.iterdir())  # nothing partial left
        assert len(_greedy(model)) == len(PROMPTS)
    finally:
        model.close()


def test_the_app_keeps_the_file_in_its_cache_folder(q4_dir: Path, tmp_path: Path) -> None:
    from engine.paths import resolve_paths
    from engine.rag.answer.in_use import open_model

    paths = resolve_paths(env={"RAGDOLL_HOME": str(tmp_path / "home")}).ensure()
    in_use = open_model(
        model_path=q4_dir,
        placement=make_placement(model_dir=q4_dir, layer_tiers=TIERS),
        paths=paths,
        dtype="float32",
    )
    executor = in_use.answerer.model.executor
    try:
        assert executor.store.decode == "kernel"
        assert executor.store.repacked is not None
        assert len(_files(paths.cache / "int4")) == 1
    finally:
        executor.close()
