"""The engine's settings, kept as JSON in the config folder."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from engine.json_file import set_aside, write_json
from engine.wire import EngineSettings, from_json_dict, to_json_dict


def load_settings(*, file: Path) -> EngineSettings:
    try:
        return from_json_dict(EngineSettings, json.loads(file.read_text()))
    except FileNotFoundError:
        return EngineSettings()
    except (ValueError, TypeError) as e:
        # A damaged settings file must not stop the app: keep it aside, start fresh.
        set_aside(file=file, what="settings file", error=e)
        return EngineSettings()


def save_settings(*, file: Path, settings: EngineSettings) -> None:
    write_json(file=file, data=to_json_dict(settings))


def with_changes(settings: EngineSettings, **changes: object) -> EngineSettings:
    return dataclasses.replace(settings, **changes)  # type: ignore[arg-type]


class SettingsFile:
    """The settings in force and the file that keeps them: each change is saved as it
    is made. The engine's parts that change a setting (the model choice, the embedder
    and ranker choices) share one."""

    def __init__(self, *, file: Path) -> None:
        self._file = file
        self.current = load_settings(file=file)

    def keep(self, settings: EngineSettings) -> EngineSettings:
        self.current = settings
        save_settings(file=self._file, settings=settings)
        return settings

    def change(self, **changes: object) -> EngineSettings:
        return self.keep(with_changes(self.current, **changes))
