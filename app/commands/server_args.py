"""What `ragdoll model --server` and `ragdoll embedder --server` share: the key file and
CA file options, and listing a server's models through the engine."""

from __future__ import annotations

import argparse

from engine.service.client import EngineClient


def add_key_and_ca(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--api-key-file",
        metavar="FILE",
        help="a file holding the server's API key (stored by the engine readable only by you)",
    )
    p.add_argument(
        "--ca-file", metavar="FILE", help="the CA certificates (PEM) of a server with a private CA"
    )


def print_server_models(
    *, client: EngineClient, url: str, api_key: str | None, ca_file: str | None, choose: str
) -> None:
    """The models the server lists (asked by the engine), then how to choose one."""
    models = client.server_models(url=url, api_key=api_key, ca_file=ca_file)
    print(f"{url} serves:" if models else f"{url} lists no models")
    for name in models:
        print(f"  {name}")
    print(f"Choose one: {choose}")
