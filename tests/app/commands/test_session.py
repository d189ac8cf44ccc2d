"""app/commands/session.py: a command that asks waits for a chosen model still loading."""

from __future__ import annotations

from dataclasses import replace

import pytest

from app.commands.session import wait_for_model
from engine.wire import EngineStatus

LOADING = EngineStatus(
    version="0",
    pid=1,
    documents=1,
    chunks=1,
    embedder="e",
    model="/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
    answer_mode="extractive",
)


class _Client:
    def __init__(self, statuses: list[EngineStatus]) -> None:
        self._statuses = statuses
        self.asked = 0

    def status(self) -> EngineStatus:
        self.asked += 1
        return self._statuses[min(self.asked, len(self._statuses)) - 1]


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_a_loading_model_is_waited_for_and_said(capsys: pytest.CaptureFixture[str]) -> None:
    loaded = replace(LOADING, answer_mode="generative")
    client = _Client([LOADING] * 40 + [loaded])
    clock = _Clock()
    wait_for_model(client, poll_s=0.5, clock=clock, sleep=clock.sleep)  # type: ignore[arg-type]
    assert client.asked == 41 and clock.now == 20.0
    said = capsys.readouterr().err.splitlines()
    # Said at the start and every 15 s, with the model's file name.
    assert said == [
        "Loading the language model (qwen2.5-coder-1.5b-instruct-q4_k_m.gguf)… 0 s",
        "Loading the language model (qwen2.5-coder-1.5b-instruct-q4_k_m.gguf)… 15 s",
    ]


@pytest.mark.parametrize(
    "status",
    [
        replace(LOADING, model=None),  # no model chosen: quoted answers, nothing to wait for
        replace(LOADING, answer_mode="generative"),
        replace(LOADING, model_error="out of memory"),  # the answer says why
    ],
)
def test_nothing_is_waited_for_without_a_model_loading(
    status: EngineStatus, capsys: pytest.CaptureFixture[str]
) -> None:
    client = _Client([status])
    wait_for_model(client, clock=_Clock(), sleep=lambda _: None)  # type: ignore[arg-type]
    assert client.asked == 1 and capsys.readouterr().err == ""


def test_a_model_that_never_loads_is_given_up_on(capsys: pytest.CaptureFixture[str]) -> None:
    client = _Client([LOADING])
    clock = _Clock()
    wait_for_model(client, wait_s=60.0, poll_s=1.0, clock=clock, sleep=clock.sleep)  # type: ignore[arg-type]
    assert clock.now == 60.0
    assert capsys.readouterr().err.splitlines()[-1] == (
        "The language model is still loading after 60 s; this answer is quoted from your documents."
    )
