"""An embeddings server as the embedder, through a real engine process and the CLI:
`ragdoll embedder --server` lists and chooses, says the documents' text is sent there,
re-embeds the collection (--wait follows it), questions are answered from the server's
vectors, status names the server, the key is stored 0600 and shows in no log, status
or setting, and a refusal is a clear message (the CLI's, and the API's 400 / 502)."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from engine.errors import EngineRequestError
from engine.paths import resolve_paths
from tests.support.engine import RunningEngine
from tests.support.model_server_stub import EMBED_DIM, model_server_stub

KEY = "sk-embed-live-0a9b8c7d6e"


def _notes(tmp_path: Path) -> Path:
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "bees.md").write_text(
        "# Apiary\n\nThe hives are inspected every Saturday morning. The honey is "
        "extracted in late August and stored in the cellar.\n"
    )
    (notes / "boats.txt").write_text("Barges carry coal along the river to the mill.\n")
    return notes


def test_the_cli_chooses_an_embeddings_server_and_the_key_stays_private(
    engine: RunningEngine, tmp_path: Path
) -> None:
    assert engine.ingest(_notes(tmp_path)).state == "done"
    key_file = tmp_path / "key.txt"
    key_file.write_text(KEY + "\n")
    with model_server_stub(key=KEY) as stub:
        listed = engine.ragdoll("embedder", "--server", stub.url, "--api-key-file", str(key_file))
        assert listed.returncode == 0, listed.stderr
        assert "stub-model" in listed.stdout and "--name MODEL" in listed.stdout

        refused = engine.ragdoll("embedder", "--server", stub.url, "--name", "stub-embed")
        assert refused.returncode != 0
        assert "refused the API key (401)" in refused.stderr
        assert engine.client.settings().embedder == "all-MiniLM-L6-v2"  # never saved

        chosen = engine.ragdoll(
            "embedder",
            "--server",
            stub.url,
            "--name",
            "stub-embed",
            "--api-key-file",
            str(key_file),
            "--batch",
            "4",
            "--wait",
        )
        assert chosen.returncode == 0, chosen.stderr
        assert (
            f"The text of your documents (every chunk) and your questions are sent to {stub.url}"
            in (chosen.stdout)
        )
        assert f"embedder: server:stub-embed@{stub.url}" in chosen.stdout
        settings = engine.client.settings()
        assert settings.embed_server_batch == 4

        status = engine.client.status()
        assert status.embedder_in_force == f"server:stub-embed@{stub.url}"
        assert status.embed_server is not None and status.embed_server.in_force
        shown = engine.ragdoll("status")
        line = f"embeddings server: stub-embed on {stub.url} (the text of your documents"
        assert line in shown.stdout

        answer = engine.client.ask(question="What do barges carry?")
        assert answer.citations and answer.citations[0].path.endswith("boats.txt")
        assert stub.state.embed_requests[-1]["input"][0].startswith("What do barges carry")
        assert all(len(r["input"]) <= 4 for r in stub.state.embed_requests)
        # RAGDoll's own /v1/embeddings answers with the embedder in force: the server's.
        vectors = engine.client._request(
            "POST", "/v1/embeddings", json={"input": ["owls"], "model": "x"}
        )
        assert len(vectors["data"][0]["embedding"]) == EMBED_DIM

    paths = resolve_paths()
    stored = paths.config / "embeddings-server.key"
    assert stat.S_IMODE(stored.stat().st_mode) == 0o600
    assert stored.read_text() == KEY
    exposed = [
        json.dumps(engine.client._request("GET", "/v1/status")),
        json.dumps(engine.client._request("GET", "/v1/settings")),
        *(p.read_text(errors="replace") for p in paths.logs.glob("*.log")),
        paths.settings_file.read_text(),
    ]
    assert not any(KEY in text for text in exposed)


def test_the_api_refuses_an_address_and_a_server_that_is_down(engine: RunningEngine) -> None:
    with pytest.raises(EngineRequestError) as bad:
        engine.client.set_embedder_server(url="gpu-box:8000", model="m")
    assert bad.value.status == 400 and "not a server address" in str(bad.value)
    with model_server_stub() as stub:
        pass  # stopped: nothing listens there now
    with pytest.raises(EngineRequestError) as down:
        engine.client.set_embedder_server(url=stub.url, model="stub-embed", timeout_s=2)
    assert down.value.status == 502 and "cannot reach the embeddings server" in str(down.value)
    assert engine.client.status().embed_server is None
