"""The engine's settings, kept as JSON in the config folder."""

from __future__ import annotations

import dataclasses
import json
import logging
import os
from pathlib import Path

from engine.wire import EngineSettings, from_json_dict, to_json_dict

log = logging.getLogger(__name__)


def load_settings(*, file: Path) -> EngineSettings:
    try:
        return from_json_dict(EngineSettings, json.loads(file.read_text()))
    except FileNotFoundError:
        return EngineSettings()
    except (ValueError, TypeError) as e:
        # A damaged settings file must not stop the app: keep it aside, start fresh.
        aside = file.with_suffix(".broken")
        os.replace(file, aside)
        log.warning("settings file was unreadable (%s); moved to %s", e, aside)
        return EngineSettings()


def save_settings(*, file: Path, settings: EngineSettings) -> None:
    file.parent.mkdir(parents=True, exist_ok=True)
    tmp = file.with_suffix(".tmp")
    tmp.write_text(json.dumps(to_json_dict(settings), indent=2))
    os.replace(tmp, file)


def with_changes(settings: EngineSettings, **changes: object) -> EngineSettings:
    return dataclasses.replace(settings, **changes)  # type: ignore[arg-type]
