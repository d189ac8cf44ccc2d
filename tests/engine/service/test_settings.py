"""SettingsFile: the settings in force, each change saved as it is made."""

from __future__ import annotations

from pathlib import Path

from engine.service.settings import SettingsFile, load_settings
from engine.wire import EngineSettings


def test_a_change_is_in_force_and_saved_at_once(tmp_path: Path) -> None:
    file = tmp_path / "settings.json"
    settings = SettingsFile(file=file)
    assert settings.current == EngineSettings() and not file.exists()
    changed = settings.change(reranker="model", server_concurrency=4)
    assert settings.current == changed and changed.reranker == "model"
    assert load_settings(file=file) == changed
    kept = settings.keep(EngineSettings(embedder="other"))
    assert SettingsFile(file=file).current == kept == settings.current


def test_a_damaged_file_gives_the_defaults(tmp_path: Path) -> None:
    file = tmp_path / "settings.json"
    file.write_text("{not json")
    assert SettingsFile(file=file).current == EngineSettings()
