"""The API's own settings (config/server.json): origins the person allowed, and
whether the window leaves the engine running when it closes."""

from __future__ import annotations

import dataclasses
import json
import threading
from pathlib import Path

from engine.json_file import set_aside, write_json
from engine.service.auth import normalize_origin
from engine.wire import ServerSettings, from_json_dict, to_json_dict


class ServerSettingsStore:
    def __init__(self, *, file: Path) -> None:
        self._file = file
        self._lock = threading.Lock()
        self._value = self._load()

    @property
    def value(self) -> ServerSettings:
        with self._lock:
            return self._value

    def allowed_origins(self) -> list[str]:
        return self.value.allowed_origins

    def update(
        self,
        *,
        allowed_origins: list[str] | None = None,
        keep_engine_running: bool | None = None,
        api_sources_in_text: bool | None = None,
    ) -> ServerSettings:
        """Raises ValueError for an origin that is not `scheme://host[:port]`."""
        changes: dict[str, object] = {}
        if allowed_origins is not None:
            normal = []
            for origin in allowed_origins:
                value = normalize_origin(origin)
                if value is None:
                    raise ValueError(
                        f"not an origin: {origin!r} (expected scheme://host[:port], "
                        "e.g. http://localhost:3000; wildcards are not allowed)"
                    )
                normal.append(value)
            changes["allowed_origins"] = sorted(set(normal))
        if keep_engine_running is not None:
            changes["keep_engine_running"] = keep_engine_running
        if api_sources_in_text is not None:
            changes["api_sources_in_text"] = api_sources_in_text
        with self._lock:
            self._value = dataclasses.replace(self._value, **changes)  # type: ignore[arg-type]
            self._save(self._value)
            return self._value

    def _load(self) -> ServerSettings:
        try:
            value = from_json_dict(ServerSettings, json.loads(self._file.read_text("utf-8")))
            bad = [o for o in value.allowed_origins if normalize_origin(o) is None]
            if bad:
                raise ValueError(f"not origins: {bad}")
            return value
        except FileNotFoundError:
            return ServerSettings()
        except (ValueError, TypeError, AttributeError) as e:
            # A damaged file must not open the API: keep it aside, allow nothing extra.
            set_aside(file=self._file, what="server settings", error=e)
            return ServerSettings()

    def _save(self, value: ServerSettings) -> None:
        write_json(file=self._file, data=to_json_dict(value))
