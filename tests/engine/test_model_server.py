"""A model server as the generator, through a real engine process: `ragdoll model
--server` lists and chooses, answers come with citations from the server, the key is
stored 0600 and appears in no log, status or settings, a failing server gives a
clear error that keeps the question, and choosing `--none` goes back."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from engine.errors import EngineRequestError
from engine.paths import resolve_paths
from tests.support.engine import RunningEngine
from tests.support.model_server_stub import model_server_stub

KEY = "sk-live-4b3a2c1d0e9f8a7b"


def _notes(tmp_path: Path) -> Path:
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "bees.md").write_text(
        "# Apiary\n\nThe hives are inspected every Saturday morning. The honey is "
        "extracted in late August and stored in the cellar.\n"
    )
    return notes


def test_answers_come_from_the_server_and_the_key_stays_private(
    engine: RunningEngine, tmp_path: Path
) -> None:
    assert engine.ingest(_notes(tmp_path)).state == "done"
    key_file = tmp_path / "key.txt"
    key_file.write_text(KEY + "\n")
    with model_server_stub(key=KEY) as stub:
        listed = engine.ragdoll("model", "--server", stub.url, "--api-key-file", str(key_file))
        assert listed.returncode == 0, listed.stderr
        assert "stub-model" in listed.stdout

        chosen = engine.ragdoll(
            "model",
            "--server",
            stub.url,
            "--name",
            "stub-model",
            "--api-key-file",
            str(key_file),
            "--first-token-timeout",
            "300",
        )
        assert chosen.returncode == 0, chosen.stderr
        assert "are sent to" in chosen.stdout and stub.url in chosen.stdout
        assert engine.client.settings().server_first_token_s == 300

        answer = engine.client.ask(question="When is the honey extracted?")
        assert answer.mode == "generative" and answer.model == "stub-model"
        assert answer.answer.startswith("The honey is extracted in late August")
        assert answer.citations and answer.citations[0].path.endswith("bees.md")
        sent = stub.state.requests[-1]["messages"]
        assert [m["role"] for m in sent] == ["system", "user"]
        assert "late August" in sent[-1]["content"]  # the passage went, as the user was told

        status = engine.client.status()
        assert status.server is not None and status.server.model == "stub-model"
        assert status.server.first_token_ms is not None
        assert status.server.cached_tokens == 300

        # The hardware view plans the index alone and names the server instead.
        hardware = engine.client.hardware()
        assert hardware.placement is None
        assert hardware.note is not None and f"stub-model on the model server {stub.url}" in (
            hardware.note
        )

        shown = engine.ragdoll("status")
        assert f"model server: {stub.url} (passages of your documents are sent there)" in (
            shown.stdout
        )

        # The CLI's own ask streams the server's answer with its sources.
        asked = engine.ragdoll("ask", "When is the honey extracted?")
        assert asked.returncode == 0, asked.stderr
        assert "late August" in asked.stdout and "bees.md" in asked.stdout

    paths = resolve_paths()
    stored = paths.config / "model-server.key"
    assert stat.S_IMODE(stored.stat().st_mode) == 0o600
    assert stored.read_text() == KEY
    exposed = [
        json.dumps(engine.client._request("GET", "/v1/status")),
        json.dumps(engine.client._request("GET", "/v1/settings")),
        *(p.read_text(errors="replace") for p in paths.logs.glob("*.log")),
        paths.settings_file.read_text(),
    ]
    assert not any(KEY in text for text in exposed)

    assert engine.ragdoll("model", "--none").returncode == 0
    assert not stored.exists()  # kept only while the server is in use
    assert engine.client.status().server is None


def test_a_failing_server_gives_a_clear_error(engine: RunningEngine, tmp_path: Path) -> None:
    assert engine.ingest(_notes(tmp_path)).state == "done"
    with model_server_stub() as stub:
        refused = engine.ragdoll("model", "--server", stub.url, "--name", "no-such-model")
        assert refused.returncode != 0
        assert "has no model 'no-such-model'" in refused.stderr
        assert engine.client.settings().server_url is None  # never saved

        engine.client.set_model_server(url=stub.url, model="broken")
        with pytest.raises(Exception) as failed:
            engine.client.ask(question="When is the honey extracted?")
        message = str(failed.value)
        assert "error of its own (500)" in message
        assert "Your question is kept" in message

        asked = engine.ragdoll("ask", "When is the honey extracted?")
        assert asked.returncode != 0
        assert "error of its own (500)" in asked.stderr + asked.stdout
    with pytest.raises(EngineRequestError) as bad:
        engine.client.set_model_server(url="gpu-box:8000", model="m")
    assert bad.value.status == 400 and "not a server address" in str(bad.value)
    with pytest.raises(EngineRequestError) as down:
        engine.client.set_model_server(url=stub.url, model="stub-model")
    assert down.value.status == 502 and "cannot reach" in str(down.value)
