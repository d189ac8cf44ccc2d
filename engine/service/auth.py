"""The token (new at each engine start), the engine's proof of identity, and the
checks every request passes."""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import os
import secrets
import socket
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "[::1]", "::1"})


IDENTITY_PATH = "/v1/identity"
# The key an engine proves itself with is derived from the token, never the token:
# a proof shows knowledge of the token without handing anything reusable over.
_IDENTITY_LABEL = b"RAGDoll engine identity v1"
_CHALLENGE_HEX = frozenset("0123456789abcdef")


def new_token(*, file: Path) -> str:
    """A fresh token in a file only the user can read (mode 0600): each engine start
    makes one, so a token stolen from an earlier engine opens nothing."""
    file.parent.mkdir(parents=True, exist_ok=True)
    token = secrets.token_urlsafe(32)
    tmp = file.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(token)
    if os.name == "posix":
        os.chmod(tmp, 0o600)  # an older .tmp left looser keeps its mode through O_CREAT
    os.replace(tmp, file)
    return token


def identity_proof(*, token: str, challenge: str, pid: int, port: int) -> str:
    """What the engine answers to a challenge: an HMAC under a key derived from the
    token, over the challenge, its pid and the port the question came in on. A
    program that does not hold the token cannot make it; one that relays the
    question to the engine on another port gets the wrong port signed."""
    key = hmac.new(token.encode(), _IDENTITY_LABEL, hashlib.sha256).digest()
    message = f"{challenge}\n{pid}\n{port}".encode()
    return hmac.new(key, message, hashlib.sha256).hexdigest()


def valid_challenge(challenge: str | None) -> bool:
    """32 to 128 lower-case hex digits: what a client makes with secrets.token_hex."""
    return (
        challenge is not None and 32 <= len(challenge) <= 128 and set(challenge) <= _CHALLENGE_HEX
    )


def token_matches(*, header: str | None, token: str) -> bool:
    if not header:
        return False
    scheme, _, credentials = header.strip().partition(" ")
    if scheme.lower() != "bearer":  # RFC 9110 §11.1: the scheme is case-insensitive
        return False
    return hmac.compare_digest(credentials.strip().encode(), token.encode())


def host_is_loopback(host_header: str | None) -> bool:
    """DNS rebinding defence: a browser page at evil.example resolving to
    127.0.0.1 still sends Host: evil.example."""
    if not host_header:
        return False
    return _strip_port(host_header.strip().lower()) in LOOPBACK_HOSTS


@dataclass(frozen=True, kw_only=True)
class HostPolicy:
    """Which Host headers the engine answers.

    On loopback (the default) only loopback names pass. An engine asked to listen
    on the network also answers IP literals and this machine's own names: DNS
    rebinding needs a name the attacker controls, and the token is still required."""

    network: bool = False
    names: frozenset[str] = frozenset()  # lower-case host names, without port

    @classmethod
    def for_listen_address(cls, *, address: str, extra: Iterable[str] = ()) -> HostPolicy:
        if is_loopback_address(address):
            return cls()
        names = {socket.gethostname().lower(), socket.getfqdn().lower(), *extra}
        names |= {f"{n.split('.')[0]}.local" for n in list(names) if n}
        return cls(network=True, names=frozenset(n.lower() for n in names if n))


def host_allowed(host_header: str | None, *, policy: HostPolicy) -> bool:
    if host_is_loopback(host_header):
        return True
    if not policy.network or not host_header:
        return False
    host = _strip_port(host_header.strip().lower())
    if host in policy.names:
        return True
    try:
        ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    return True


def is_loopback_address(address: str) -> bool:
    if address.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(address.strip("[]")).is_loopback
    except ValueError:
        return False


def _strip_port(host: str) -> str:
    if host.startswith("["):
        return host[: host.find("]") + 1]
    if host.count(":") == 1:
        return host.split(":", 1)[0]
    return host


def normalize_origin(origin: str) -> str | None:
    """`scheme://host[:port]` in lower case, or None for anything that is not an
    origin (a path, a wildcard, "null", user info)."""
    try:
        origin.encode("utf-8")  # a lone surrogate is not text: never saved, never echoed
        parts = urlsplit(origin.strip())
        port = parts.port
    except ValueError:  # UnicodeEncodeError included
        return None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return None
    if parts.path not in ("", "/") or parts.query or parts.fragment or "@" in parts.netloc:
        return None
    host = parts.hostname.lower()
    if ":" in host:
        host = f"[{host}]"
    return f"{parts.scheme}://{host}" + (f":{port}" if port is not None else "")


def origin_is_local(origin: str) -> bool:
    normal = normalize_origin(origin)
    if normal is None:
        return False
    host = _strip_port(normal.split("://", 1)[1])
    return host in LOOPBACK_HOSTS


def origin_allowed(origin: str | None, *, allowed: Iterable[str]) -> bool:
    """A browser page's origin may call the API only when it is on this machine
    (a loopback origin) or one the person allowed; no Origin header (curl, SDKs)
    passes. Cross-site requests from other pages are refused (CSRF)."""
    if origin is None:
        return True
    if origin_is_local(origin):
        return True
    normal = normalize_origin(origin)
    return normal is not None and normal in {normalize_origin(a) for a in allowed}
