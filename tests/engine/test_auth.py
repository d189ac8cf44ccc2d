from __future__ import annotations

import os
import stat
from pathlib import Path

from engine.auth import host_is_loopback, load_or_create_token, token_matches


def test_token_file_is_private_and_stable(tmp_path: Path) -> None:
    file = tmp_path / "cfg" / "engine.token"
    token = load_or_create_token(file=file)
    assert len(token) >= 32
    assert stat.S_IMODE(file.stat().st_mode) == 0o600
    assert load_or_create_token(file=file) == token


def test_loose_permissions_are_tightened(tmp_path: Path) -> None:
    file = tmp_path / "engine.token"
    file.write_text("abc")
    os.chmod(file, 0o644)
    assert load_or_create_token(file=file) == "abc"
    assert stat.S_IMODE(file.stat().st_mode) == 0o600


def test_token_check() -> None:
    assert token_matches(header="Bearer s3cret", token="s3cret")
    assert not token_matches(header="Bearer wrong", token="s3cret")
    assert not token_matches(header=None, token="s3cret")
    assert not token_matches(header="s3cret", token="s3cret")


def test_only_loopback_hosts_pass() -> None:
    for ok in ("127.0.0.1:8000", "localhost", "LOCALHOST:1", "[::1]:9000"):
        assert host_is_loopback(ok), ok
    for bad in (
        "evil.example",
        "evil.example:8000",
        "192.168.1.2:80",
        "",
        None,
        "127.0.0.1.evil.example",
    ):
        assert not host_is_loopback(bad), bad
