"""ModelChoice without loading a model: extractive answers chosen, the setting saved, the
pipelines told; a model server refused before anything is saved. Loading real models is
tested through the engine (tests/engine/test_core.py, test_model_server.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.paths import resolve_paths
from engine.rag.answer.server_client import ServerAddressError
from engine.rag.store.lance_store import LanceStore
from engine.runtime.planner.report import store_spec
from engine.service.model_choice import ModelChoice
from engine.service.settings import SettingsFile, load_settings


def _choice(tmp_path: Path, changes: list[str]) -> tuple[ModelChoice, SettingsFile]:
    settings = SettingsFile(file=tmp_path / "config" / "settings.json")
    store = LanceStore(folder=tmp_path / "index", background=False)
    choice = ModelChoice(
        paths=resolve_paths(env={"RAGDOLL_HOME": str(tmp_path / "home")}).ensure(),
        settings=settings,
        store=store,
        planner_store=lambda: store_spec(chunks=0, vector_dim=384),
        on_change=lambda: changes.append("changed"),
    )
    return choice, settings


def test_no_model_is_extractive_and_saved(tmp_path: Path) -> None:
    changes: list[str] = []
    choice, settings = _choice(tmp_path, changes)
    assert choice.current() is None and choice.placement() is None
    assert choice.server_info() is None and choice.error() is None
    chosen = choice.set_model(model=None, weights="int8")
    assert chosen.model is None and chosen.model_weights == "int8"
    assert load_settings(file=tmp_path / "config" / "settings.json") == chosen
    assert changes == ["changed"] and settings.current == chosen
    choice.failed("the model file is gone")
    assert choice.error() == "the model file is gone"


def test_a_server_that_is_not_an_address_is_refused_and_nothing_saved(tmp_path: Path) -> None:
    changes: list[str] = []
    choice, settings = _choice(tmp_path, changes)
    with pytest.raises(ServerAddressError):
        choice.set_model_server(url="ftp://gpu-box", model="m")
    with pytest.raises(ValueError):
        choice.set_model_server(url="http://127.0.0.1:9", model="m", concurrency=0)
    assert settings.current.server_url is None and changes == []
    assert not (tmp_path / "config" / "settings.json").exists()
