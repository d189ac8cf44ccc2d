"""An embedder id names an embeddings server and its model, and nothing else does."""

from __future__ import annotations

from engine.rag.ingest.server_embedder_id import EmbedServerRef, server_ref


def test_ids_name_the_server_and_model() -> None:
    ref = EmbedServerRef(url="http://gpu-box:8000/v1", model="BAAI/bge-m3")
    assert ref.id == "server:BAAI/bge-m3@http://gpu-box:8000/v1"
    assert server_ref(ref.id) == ref
    assert server_ref("server:user@host@https://h:1") == EmbedServerRef(
        url="https://h:1", model="user@host"
    )
    for local in ("all-MiniLM-L6-v2", "/models/e5", "server:no-address"):
        assert server_ref(local) is None
