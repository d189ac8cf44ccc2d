"""The per-install token and the checks every request passes."""

from __future__ import annotations

import hmac
import os
import secrets
from pathlib import Path

LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "[::1]", "::1"})


def load_or_create_token(*, file: Path) -> str:
    """The token lives in a file only the user can read (mode 0600)."""
    file.parent.mkdir(parents=True, exist_ok=True)
    try:
        token = file.read_text().strip()
        if token:
            if os.name == "posix" and file.stat().st_mode & 0o077:
                os.chmod(file, 0o600)
            return token
    except FileNotFoundError:
        pass
    token = secrets.token_urlsafe(32)
    tmp = file.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(token)
    os.replace(tmp, file)
    return token


def token_matches(*, header: str | None, token: str) -> bool:
    if not header or not header.startswith("Bearer "):
        return False
    return hmac.compare_digest(header[7:].strip().encode(), token.encode())


def host_is_loopback(host_header: str | None) -> bool:
    """DNS rebinding defence: a browser page at evil.example resolving to
    127.0.0.1 still sends Host: evil.example."""
    if not host_header:
        return False
    host = host_header.strip().lower()
    if host.startswith("["):
        host = host[: host.find("]") + 1]
    elif host.count(":") == 1:
        host = host.split(":", 1)[0]
    return host in LOOPBACK_HOSTS
