"""Hub downloads against a fake hub on loopback: progress, cancel, resume, refusals."""

from __future__ import annotations

import os
from pathlib import Path

import httpx
import pytest

from engine.service.models.download import (
    CHUNK_BYTES,
    COMPLETE_MARKER,
    NO_CONNECTION,
    DownloadJob,
    RemoteFile,
    hub_failure,
    wanted,
    without_duplicate_weights,
)
from tests.engine.service.models.fake_hub import FakeRepo, fake_hub

REPO = "acme/tiny-model"


def _repo(**kw: object) -> FakeRepo:
    weights = os.urandom(3 * CHUNK_BYTES + 12345)
    files = {
        "config.json": b'{"model_type": "qwen2"}',
        "model.safetensors": weights,
        "tokenizer.json": b"{}",
        "pytorch_model.bin": b"never fetched",
        "README.md": b"# readme",
    }
    return FakeRepo(repo_id=REPO, files=files, **kw)  # type: ignore[arg-type]


def test_only_loadable_files_are_wanted() -> None:
    assert wanted("model-00001-of-00002.safetensors") and wanted("config.json")
    assert wanted("model.safetensors.index.json") and wanted("tokenizer.model")
    assert not wanted("pytorch_model.bin") and not wanted("model.gguf")


def test_mistral_consolidated_weights_are_not_fetched_twice() -> None:
    files = [
        RemoteFile(name=n, size=1)
        for n in (
            "config.json",
            "consolidated.safetensors",
            "model-00001-of-00002.safetensors",
            "model-00002-of-00002.safetensors",
            "model.safetensors.index.json",
        )
    ]
    kept = [f.name for f in without_duplicate_weights(files)]
    assert "consolidated.safetensors" not in kept and len(kept) == 4
    only = [
        RemoteFile(name="config.json", size=1),
        RemoteFile(name="consolidated.safetensors", size=1),
    ]
    assert without_duplicate_weights(only) == only


def test_download_with_progress(tmp_path: Path) -> None:
    repo = _repo()
    seen = []
    with fake_hub([repo]) as endpoint:
        job = DownloadJob(
            repo_id=REPO, folder=tmp_path / "m", endpoint=endpoint, on_change=seen.append
        )
        final = job.start().wait(timeout_s=30)
    assert final.state == "done", final.error
    folder = tmp_path / "m"
    assert (folder / "model.safetensors").read_bytes() == repo.files["model.safetensors"]
    assert (folder / COMPLETE_MARKER).is_file()
    assert not (folder / "pytorch_model.bin").exists() and not list(folder.glob("*.part"))
    assert final.files_done == final.files_total == 3
    assert (
        final.bytes_done
        == final.bytes_total
        == sum(len(repo.files[n]) for n in ("config.json", "model.safetensors", "tokenizer.json"))
    )
    done = [s.bytes_done for s in seen]
    assert done == sorted(done) and len(set(done)) > 3  # progress came in steps


def test_cancel_keeps_the_part_and_the_next_try_resumes(tmp_path: Path) -> None:
    repo = _repo(slow_s=0.01)
    folder = tmp_path / "m"
    with fake_hub([repo]) as endpoint:
        job = DownloadJob(repo_id=REPO, folder=folder, endpoint=endpoint).start()
        state = job.snapshot()
        while state.bytes_done < CHUNK_BYTES and state.state in ("queued", "running"):
            state = job.wait_change(after=state, timeout_s=10)
        cancelled = job.cancel() and job.wait(timeout_s=30)
        assert cancelled.state == "cancelled"
        part = folder / "model.safetensors.part"
        kept = part.stat().st_size
        assert 0 < kept < len(repo.files["model.safetensors"])
        assert not (folder / COMPLETE_MARKER).exists()

        repo.slow_s = 0.0
        again = DownloadJob(repo_id=REPO, folder=folder, endpoint=endpoint).start()
        final = again.wait(timeout_s=30)
    assert final.state == "done", final.error
    assert (folder / "model.safetensors").read_bytes() == repo.files["model.safetensors"]
    assert repo.ranges == [f"bytes={kept}-"]
    assert final.bytes_resumed >= kept


def test_gated_repo_without_a_token_fails_with_a_reason(tmp_path: Path) -> None:
    with fake_hub([_repo(gated=True)]) as endpoint:
        final = (
            DownloadJob(repo_id=REPO, folder=tmp_path / "m", endpoint=endpoint)
            .start()
            .wait(timeout_s=30)
        )
    assert final.state == "failed"
    assert final.error is not None and "licence" in final.error


@pytest.mark.parametrize(
    ("files", "reason"),
    [
        ({"config.json": b"{}", "model.bin": b"x"}, "safetensors"),
        ({"a.safetensors": b"x"}, "config"),
    ],
)
def test_repos_ragdoll_cannot_load_are_refused(
    tmp_path: Path, files: dict[str, bytes], reason: str
) -> None:
    with fake_hub([FakeRepo(repo_id=REPO, files=files)]) as endpoint:
        final = (
            DownloadJob(repo_id=REPO, folder=tmp_path / "m", endpoint=endpoint)
            .start()
            .wait(timeout_s=30)
        )
    assert final.state == "failed" and reason in (final.error or "")


def test_one_gguf_file_of_a_repo_is_fetched_alone(tmp_path: Path) -> None:
    """A Recommended model's GGUF variant: that file only (not the repo's other
    quantizations), whole once done, and a name the repo lacks is a failure that says so."""
    q4 = os.urandom(2 * CHUNK_BYTES + 7)
    files = {"README.md": b"# r", "m-Q4_K_M.gguf": q4, "m-Q8_0.gguf": b"x" * 999}
    repo = FakeRepo(repo_id="acme/m-GGUF", files=files)
    folder = tmp_path / "acme--m-GGUF"
    with fake_hub([repo]) as endpoint:
        job = DownloadJob(
            repo_id=repo.repo_id, folder=folder, file="m-Q4_K_M.gguf", endpoint=endpoint
        )
        final = job.start().wait(timeout_s=30)
        missing = (
            DownloadJob(repo_id=repo.repo_id, folder=folder, file="m-F16.gguf", endpoint=endpoint)
            .start()
            .wait(timeout_s=30)
        )
    assert final.state == "done", final.error
    assert final.file == "m-Q4_K_M.gguf" and final.files_total == 1
    assert final.bytes_done == final.bytes_total == len(q4)
    assert sorted(p.name for p in folder.iterdir()) == ["m-Q4_K_M.gguf"]
    assert (folder / "m-Q4_K_M.gguf").read_bytes() == q4
    assert missing.state == "failed" and "has no file m-F16.gguf" in (missing.error or "")


def test_without_a_network_the_failure_says_so(tmp_path: Path) -> None:
    """Issue #44, 5: "[Errno -2] Name or service not known" is no message for a person."""
    import socket

    with socket.socket() as s:  # a port nothing listens on: connection refused
        s.bind(("127.0.0.1", 0))
        endpoint = f"http://127.0.0.1:{s.getsockname()[1]}"
    job = DownloadJob(repo_id=REPO, folder=tmp_path / "m", endpoint=endpoint)
    final = job.start().wait(timeout_s=30)
    assert final.state == "failed"
    assert final.error is not None and final.error.startswith(NO_CONNECTION)
    assert "Errno" not in final.error
    dns = httpx.ConnectError("[Errno -2] Name or service not known")
    assert hub_failure(dns).startswith(NO_CONNECTION)
    assert "broke off" in hub_failure(httpx.ReadError("connection reset"))
    assert hub_failure(ValueError("acme/x has no config.json")) == "acme/x has no config.json"
