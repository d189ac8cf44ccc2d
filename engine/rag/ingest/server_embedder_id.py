"""How an embedder id names an embeddings server: `server:MODEL@URL`.

The id is the `embedder` setting and the index's embedder id, so the index records
where its vectors came from, and another server or model is another embedder. Kept
apart from the embedder itself (engine/rag/ingest/server_embedder.py) so that the
window and the CLI can name a server without its HTTP client.
"""

from __future__ import annotations

from dataclasses import dataclass

SERVER_PREFIX = "server:"


@dataclass(frozen=True, kw_only=True)
class EmbedServerRef:
    """Which server embeds and with which of its models."""

    url: str
    model: str

    @property
    def id(self) -> str:
        return f"{SERVER_PREFIX}{self.model}@{self.url}"


def server_ref(name: str) -> EmbedServerRef | None:
    """The server and model an embedder id names, or None for a local embedder."""
    if not name.startswith(SERVER_PREFIX):
        return None
    rest = name[len(SERVER_PREFIX) :]
    at = rest.rfind("@http")  # a model name may hold "@"; an address starts with http
    if at <= 0:
        return None
    return EmbedServerRef(url=rest[at + 1 :], model=rest[:at])
