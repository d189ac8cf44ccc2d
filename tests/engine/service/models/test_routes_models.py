"""The models router with a fake hub: a download asked for over HTTP lands in the data
folder, and the recommendations then call the model installed."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from engine.environ import EngineEnviron
from engine.paths import Paths, resolve_paths
from engine.runtime.planner.placement import DEFAULT_VECTOR_DIM, StoreSpec
from engine.runtime.planner.report import store_spec
from engine.service.api.routes_models import models_router
from tests.engine.service.models.fake_hub import FakeRepo, fake_hub

REPO = "Qwen/Qwen2.5-0.5B-Instruct"  # in the catalogue


@dataclass
class _Store:
    meta: None = None

    def counts(self) -> tuple[int, int]:
        return 0, 0


@dataclass
class _Settings:
    model: str | None = None
    reranker: str | None = None


@dataclass
class _Engine:
    paths: Paths
    store: _Store = field(default_factory=_Store)
    settings: _Settings = field(default_factory=_Settings)

    def planner_store(self) -> StoreSpec:
        return store_spec(chunks=self.store.counts()[1], vector_dim=DEFAULT_VECTOR_DIM)

    @property
    def environ(self) -> EngineEnviron:
        # Read at each request: each test sets the environment after the fixture.
        return EngineEnviron.from_environ()


@pytest.fixture
def api(tmp_path: Path) -> TestClient:
    engine = _Engine(paths=resolve_paths(env={"RAGDOLL_HOME": str(tmp_path / "home")}))
    app = FastAPI()
    app.include_router(models_router(engine=engine))  # type: ignore[arg-type]
    return TestClient(app)


def _wait_final(api: TestClient, download_id: str) -> dict[str, object]:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        body = api.get(f"/v1/models/downloads/{download_id}").json()
        if body["state"] in ("done", "cancelled", "failed"):
            return body
        time.sleep(0.05)
    raise AssertionError("the download did not finish")


def test_download_over_http_then_installed(
    api: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = {"config.json": b'{"model_type": "qwen2"}', "model.safetensors": os.urandom(300_000)}
    with fake_hub([FakeRepo(repo_id=REPO, files=files)]) as endpoint:
        monkeypatch.setenv("HF_ENDPOINT", endpoint)
        monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
        before = {m["id"]: m for m in api.get("/v1/models/recommended").json()["models"]}
        assert not before[REPO]["installed"]
        started = api.post("/v1/models/download", json={"repo_id": REPO})
        assert started.status_code == 200, started.text
        final = _wait_final(api, started.json()["download_id"])
    assert final["state"] == "done", final
    assert final["bytes_done"] == final["bytes_total"] == sum(len(v) for v in files.values())
    folder = Path(str(final["folder"]))
    assert (folder / "model.safetensors").read_bytes() == files["model.safetensors"]
    after = {m["id"]: m for m in api.get("/v1/models/recommended").json()["models"]}
    assert after[REPO]["installed"] and after[REPO]["installed_path"] == str(folder)
    listed = api.get("/v1/models/downloads").json()["downloads"]
    assert [d["repo_id"] for d in listed] == [REPO]


def test_offline_refuses_and_nothing_is_contacted(
    api: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = FakeRepo(repo_id=REPO, files={"config.json": b"{}"})
    with fake_hub([repo]) as endpoint:
        monkeypatch.setenv("HF_ENDPOINT", endpoint)
        monkeypatch.setenv("HF_HUB_OFFLINE", "1")
        refused = api.post("/v1/models/download", json={"repo_id": REPO})
    assert refused.status_code == 409
    assert repo.requests == 0 and api.get("/v1/models/downloads").json() == {"downloads": []}
    assert api.post("/v1/models/download", json={"repo_id": "no-slash"}).status_code == 422
    assert api.post("/v1/models/downloads/nope/cancel").status_code == 404


def test_a_recommended_models_gguf_file_downloaded_over_http_loads(
    api: TestClient, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The Models dialog's Download GGUF: one variant's file over HTTP, then listed as
    downloaded, and that path resolves and answers (a tiny random Qwen2 stands in for
    the hub's file under the variant's name)."""
    import torch
    from gguf import GGMLQuantizationType

    from engine.rag.answer.in_use import open_model
    from engine.runtime.models.gguf_writer import write_gguf
    from engine.runtime.models.resolve import resolve_model_path
    from engine.runtime.models.synthetic import write_random_model
    from engine.service.models.catalogue_gguf import load_gguf_variants

    variant = next(v for v in load_gguf_variants() if v.model == REPO and v.quant == "Q4_K_M")
    hf = write_random_model(folder=tmp_path / "tiny", architecture="qwen2")
    data = write_gguf(
        model_dir=hf, out=tmp_path / "tiny.gguf", qtype=GGMLQuantizationType.Q4_0
    ).read_bytes()
    repo = FakeRepo(repo_id=variant.repo, files={variant.file: data, "other-q8_0.gguf": b"x"})
    with fake_hub([repo]) as endpoint:
        monkeypatch.setenv("HF_ENDPOINT", endpoint)
        monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
        body = {"repo_id": variant.repo, "file": variant.file}
        started = api.post("/v1/models/download", json=body)
        assert started.status_code == 200, started.text
        final = _wait_final(api, started.json()["download_id"])
    assert final["state"] == "done", final
    assert final["file"] == variant.file and final["bytes_done"] == len(data)
    models = {m["id"]: m for m in api.get("/v1/models/recommended").json()["models"]}
    (downloaded,) = [v for v in models[REPO]["gguf_variants"] if v["installed_path"]]
    assert downloaded["file"] == variant.file
    assert not models[REPO]["installed"]  # the model's own weights were not fetched
    monkeypatch.setenv("RAGDOLL_HOME", str(tmp_path / "home"))
    folder = resolve_model_path(model=downloaded["installed_path"])
    in_use = open_model(model_path=folder, device="cpu")
    ids = torch.tensor([[1, 5, 6, 7]])
    assert in_use.answerer.model.generate(input_ids=ids, max_new_tokens=3).shape[1] > 4
