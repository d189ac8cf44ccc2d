"""`ragdoll status`: the collection's languages, and the multilingual embedder the engine
offers, with why."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any

import pytest

from app.commands import status as status_command
from engine.rag.ingest.embedder_offer import embedder_offer
from engine.wire import EmbedderOffer, EngineStatus


@dataclass
class _Client:
    offer: EmbedderOffer | None

    def status(self) -> EngineStatus:
        return EngineStatus(
            version="0-test",
            pid=1,
            documents=2,
            chunks=25,
            embedder="all-MiniLM-L6-v2",
            model=None,
            answer_mode="extractive",
            languages=["en"],
            embedder_offer=self.offer,
        )

    def __enter__(self) -> _Client:
        return self

    def __exit__(self, *exc: object) -> None:
        pass


def _printed(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], offer: Any
) -> str:
    from engine.service.client import EngineClient

    monkeypatch.setattr(EngineClient, "connect", lambda **kwargs: _Client(offer=offer))
    assert status_command.run(argparse.Namespace(json=False)) == 0
    return capsys.readouterr().out


def test_the_offer_for_questions_in_another_language_is_printed(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    offer = embedder_offer(languages=["en"], embedder="all-MiniLM-L6-v2", asked=["de"])
    out = _printed(monkeypatch, capsys, offer)
    assert "languages: en\n" in out
    assert (
        "offered: intfloat/multilingual-e5-small (471 MB download), which reads questions "
        "asked in de (accept it in the window: Model…)"
    ) in out
    assert "offered" not in _printed(monkeypatch, capsys, None)
