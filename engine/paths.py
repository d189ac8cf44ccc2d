"""Where the app keeps what it writes.

Every path RAGDoll writes lives under the folders of one `Paths` value. The
environment variable RAGDOLL_HOME moves all of them under one folder (tests,
portable installs); otherwise they follow the platform's conventions. It is read
with the other RAGDOLL_* variables (engine/environ.py) where a process starts
(`resolve_paths`), and the `Paths` handed down from there.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import platformdirs

from engine.environ import EngineEnviron

APP_NAME = "RAGDoll"
PRIVATE_FOLDER = 0o700
PRIVATE_FILE = 0o600


@dataclass(frozen=True, kw_only=True)
class Paths:
    data: Path
    config: Path
    cache: Path
    logs: Path
    runtime: Path
    home: Path | None = None  # RAGDOLL_HOME, when the folders live under it

    @property
    def index_dir(self) -> Path:
        return self.data / "index"

    @property
    def settings_file(self) -> Path:
        return self.config / "settings.json"

    @property
    def folders_file(self) -> Path:
        return self.config / "folders.json"

    @property
    def token_file(self) -> Path:
        return self.config / "engine.token"

    @property
    def endpoint_file(self) -> Path:
        return self.runtime / "engine.json"

    @property
    def engine_lock(self) -> Path:
        return self.runtime / "engine.lock"

    @property
    def engine_log(self) -> Path:
        return self.logs / "engine.log"

    def ensure(self) -> Paths:
        """The folders exist, and only this user can enter them (0700); an install
        from before that rule gets its folders and files (0600) fixed here."""
        if self.home is not None:
            # RAGDOLL_HOME itself: 0700 too, but not what else the person keeps in it.
            self.home.mkdir(parents=True, exist_ok=True, mode=PRIVATE_FOLDER)
            _private_folder_only(self.home)
        for folder in (self.data, self.config, self.cache, self.logs, self.runtime):
            folder.mkdir(parents=True, exist_ok=True, mode=PRIVATE_FOLDER)
            keep_private(folder)
        return self


def _private_folder_only(folder: Path) -> None:
    if os.name != "posix":
        return
    try:
        if stat.S_IMODE(folder.stat().st_mode) & 0o077:
            os.chmod(folder, PRIVATE_FOLDER)
    except OSError:  # not ours: the folders inside still keep others out
        pass


def keep_private(folder: Path) -> None:
    """Make `folder` 0700 and, when it was open to others, everything in it: folders
    0700, files 0600. The index and conversations hold the documents' text, which
    another account on this machine must not read without the token."""
    if os.name != "posix":
        return  # elsewhere the user's profile folder is private already
    try:
        if stat.S_IMODE(folder.stat().st_mode) & 0o077 == 0:
            return  # fixed before (and new files inherit nothing looser than 0700 above)
        os.chmod(folder, PRIVATE_FOLDER)
    except OSError:
        return
    for root, dirnames, filenames in os.walk(folder):  # links are not followed
        for name in dirnames:
            _chmod(Path(root) / name, PRIVATE_FOLDER)
        for name in filenames:
            _chmod(Path(root) / name, PRIVATE_FILE)


def _chmod(path: Path, mode: int) -> None:
    try:
        if not path.is_symlink():
            os.chmod(path, mode)
    except OSError:  # not ours, or gone meanwhile: the folder above still keeps others out
        pass


def resolve_paths(*, env: Mapping[str, str] | None = None) -> Paths:
    """The app's folders for the environment `env` (default: this process's), honouring
    RAGDOLL_HOME when it is set: read where a process starts, then handed down."""
    return paths_under(home=EngineEnviron.from_environ(env).home)


def paths_under(*, home: Path | None) -> Paths:
    """The app's folders under `home` (RAGDOLL_HOME), else the platform's."""
    if home is not None:
        root = home.expanduser().resolve()
        return Paths(
            data=root / "data",
            config=root / "config",
            cache=root / "cache",
            logs=root / "logs",
            runtime=root / "run",
            home=root,
        )
    dirs = platformdirs.PlatformDirs(APP_NAME, appauthor=False)
    return Paths(
        data=Path(dirs.user_data_dir),
        config=Path(dirs.user_config_dir),
        cache=Path(dirs.user_cache_dir),
        logs=Path(dirs.user_log_dir),
        # The runtime folder holds the endpoint file; keep it with the config so
        # that it survives where XDG_RUNTIME_DIR is missing.
        runtime=Path(dirs.user_config_dir) / "run",
    )
