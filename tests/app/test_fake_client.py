"""The GUI tests' fake client keeps the real client's shape."""

from __future__ import annotations

import inspect

import pytest

from engine.service.client import EngineClient
from engine.wire import Answer, FolderAdded
from tests.app.fake_client import ANSWER, CITATIONS, FakeClient


def _public_methods(cls: type) -> dict[str, object]:
    return {
        name: value
        for name, value in vars(cls).items()
        if callable(value) and not name.startswith("_")
    }


def test_every_faked_call_has_the_real_signature() -> None:
    real = _public_methods(EngineClient)
    faked = {name for name in _public_methods(FakeClient) if name in real}
    assert {"status", "ask_stream", "ingest_events", "download_model"} <= faked
    for name in faked:
        fake_sig = inspect.signature(getattr(FakeClient, name))
        real_sig = inspect.signature(getattr(EngineClient, name))
        assert fake_sig == real_sig, name
    # Whatever else the fake defines is its own (test helpers), not a second API.
    assert set(_public_methods(FakeClient)) - faked == {"called"}


def test_calls_not_faked_come_from_the_real_client_or_fail_loudly() -> None:
    client = FakeClient()
    # The real client's `ask` collects the fake's stream.
    answer = client.ask(question="What do tomatoes need?")
    assert answer == Answer(
        answer=ANSWER, citations=CITATIONS, mode="extractive", note=client.note, model=None
    )
    # `add_paths` grants the folder through the fake's folders, then ingests.
    assert client.add_paths(paths=["/"]).job_id == "job-1"
    assert isinstance(client.add_folder(path="/docs"), FolderAdded)
    with pytest.raises(NotImplementedError, match="GET /v1/collections"):
        client.collections()
