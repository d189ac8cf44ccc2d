"""The model server's API key, in a file of its own that only its owner can read
(0600), apart from the settings (which the API shows) and never logged."""

from __future__ import annotations

import os
from pathlib import Path

KEY_FILE = "model-server.key"
EMBED_KEY_FILE = "embeddings-server.key"  # the embeddings server's, kept apart


def key_file(*, config: Path, name: str = KEY_FILE) -> Path:
    return config / name


def read_key(*, config: Path, name: str = KEY_FILE) -> str | None:
    try:
        key = key_file(config=config, name=name).read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        return None
    return key or None


def write_key(*, config: Path, key: str | None, name: str = KEY_FILE) -> None:
    """Store `key` (0600 from its creation: never readable by others, even briefly);
    None or "" removes it."""
    path = key_file(config=config, name=name)
    if not key:
        path.unlink(missing_ok=True)
        return
    tmp = path.with_name(path.name + ".tmp")
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(key.strip())
    os.replace(tmp, path)


def read_key_file(path: str | Path) -> str:
    """A key as the person keeps it (the CLI's --api-key-file): the file's first line.
    Raises ValueError for an empty file, OSError for one that cannot be read."""
    text = Path(path).expanduser().read_text(encoding="utf-8").strip()
    key = text.splitlines()[0].strip() if text else ""
    if not key:
        raise ValueError(f"{path} holds no key")
    return key
