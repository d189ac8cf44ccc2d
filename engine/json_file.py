"""The app's small JSON files (settings, folders, caches, the endpoint): written
whole or not at all, and a damaged one set aside rather than trusted or lost."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)


def write_json(*, file: Path, data: Any, indent: int | None = 2) -> None:
    """Through a temporary file and a rename: a crash leaves the old file or the
    new one, never half of one."""
    file.parent.mkdir(parents=True, exist_ok=True)
    tmp = file.with_suffix(".tmp")
    # 0600: settings, folders and conversations are this user's alone.
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(json.dumps(data, indent=indent))
    os.replace(tmp, file)


def set_aside(*, file: Path, what: str, error: Exception) -> Path:
    """Move an unreadable file to `.broken` (kept for the person to look at) so
    that the app starts fresh instead of failing."""
    aside = file.with_suffix(".broken")
    os.replace(file, aside)
    log.warning("%s was unreadable (%s); moved to %s", what, error, aside)
    return aside
