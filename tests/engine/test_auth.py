from __future__ import annotations

import os
import stat
from pathlib import Path

from engine.service.auth import (
    HostPolicy,
    host_allowed,
    host_is_loopback,
    identity_proof,
    new_token,
    normalize_origin,
    origin_allowed,
    token_matches,
    valid_challenge,
)


def test_each_token_is_new_and_private(tmp_path: Path) -> None:
    file = tmp_path / "cfg" / "engine.token"
    token = new_token(file=file)
    assert len(token) >= 32 and file.read_text() == token
    assert stat.S_IMODE(file.stat().st_mode) == 0o600
    os.chmod(file, 0o644)
    again = new_token(file=file)
    assert again != token and stat.S_IMODE(file.stat().st_mode) == 0o600


def test_an_identity_proof_binds_the_token_the_challenge_the_pid_and_the_port() -> None:
    proof = identity_proof(token="s3cret", challenge="ab" * 16, pid=10, port=8000)
    assert proof != identity_proof(token="other", challenge="ab" * 16, pid=10, port=8000)
    assert proof != identity_proof(token="s3cret", challenge="cd" * 16, pid=10, port=8000)
    assert proof != identity_proof(token="s3cret", challenge="ab" * 16, pid=11, port=8000)
    assert proof != identity_proof(token="s3cret", challenge="ab" * 16, pid=10, port=8001)
    assert "s3cret" not in proof
    assert valid_challenge("ab" * 16) and not valid_challenge("ab") and not valid_challenge(None)
    assert not valid_challenge("AB" * 16) and not valid_challenge("zz" * 16)


def test_token_check() -> None:
    assert token_matches(header="Bearer s3cret", token="s3cret")
    assert not token_matches(header="Bearer wrong", token="s3cret")
    assert not token_matches(header=None, token="s3cret")
    assert not token_matches(header="s3cret", token="s3cret")
    assert token_matches(header="bearer s3cret", token="s3cret")  # the scheme's case is free
    assert not token_matches(header="Basic s3cret", token="s3cret")
    assert not token_matches(header="Bearers3cret", token="s3cret")


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


def test_origins_local_or_allowed_pass() -> None:
    allowed = ["http://notes.example:8080"]
    for ok in (
        None,  # curl, SDKs: no Origin header
        "http://127.0.0.1:5173",
        "http://localhost:3000",
        "http://LOCALHOST",
        "http://[::1]:8000",
        "https://localhost:8443",
        "http://notes.example:8080",
        "http://NOTES.example:8080/",
    ):
        assert origin_allowed(ok, allowed=allowed), ok
    for bad in (
        "http://evil.example",
        "http://localhost.evil.example",
        "http://127.0.0.1.evil.example",
        "http://notes.example:9090",  # another port is another origin
        "https://notes.example:8080",
        "null",
        "",
        "file://",
        "http://user@localhost:3000",
    ):
        assert not origin_allowed(bad, allowed=allowed), bad


def test_origin_normal_form() -> None:
    assert normalize_origin("HTTP://Notes.Example:8080") == "http://notes.example:8080"
    for not_an_origin in ("*", "notes.example", "http://x.example/path", "ftp://x.example"):
        assert normalize_origin(not_an_origin) is None, not_an_origin


def test_network_listening_adapts_the_host_check() -> None:
    loopback = HostPolicy.for_listen_address(address="127.0.0.1")
    assert not loopback.network
    assert not host_allowed("192.168.1.5:8000", policy=loopback)
    network = HostPolicy.for_listen_address(address="0.0.0.0", extra=["ragdoll.lan"])
    for ok in ("192.168.1.5:8000", "[fe80::1]:8000", "ragdoll.lan", "localhost:1"):
        assert host_allowed(ok, policy=network), ok
    for bad in ("evil.example", "evil.example:8000", "", None):
        assert not host_allowed(bad, policy=network), bad


def test_an_origin_that_is_not_text_is_not_an_origin() -> None:
    from engine.service.auth import normalize_origin

    assert normalize_origin("http://a\ud800.example") is None
    assert normalize_origin("http://a.example") == "http://a.example"
