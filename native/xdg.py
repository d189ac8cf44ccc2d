"""The XDG base folders of the current user, read from an environment."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, kw_only=True)
class XdgDirs:
    home: Path
    data_home: Path  # ~/.local/share
    config_home: Path  # ~/.config

    @property
    def applications(self) -> Path:
        return self.data_home / "applications"

    @property
    def icons(self) -> Path:
        return self.data_home / "icons" / "hicolor"

    @property
    def autostart(self) -> Path:
        return self.config_home / "autostart"

    @property
    def bin(self) -> Path:
        return self.home / ".local" / "bin"


def xdg_dirs(*, env: dict[str, str] | None = None) -> XdgDirs:
    environ = os.environ if env is None else env
    home = Path(environ.get("HOME") or Path.home())
    # The spec: an unset or relative value means the default.
    data = environ.get("XDG_DATA_HOME", "")
    config = environ.get("XDG_CONFIG_HOME", "")
    return XdgDirs(
        home=home,
        data_home=Path(data) if os.path.isabs(data) else home / ".local" / "share",
        config_home=Path(config) if os.path.isabs(config) else home / ".config",
    )
