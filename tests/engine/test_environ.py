"""environment(): values set inside the block, the earlier ones (or their absence) back after it."""

from __future__ import annotations

import os

import pytest

from engine.environ import environment


def test_values_hold_inside_and_the_earlier_state_returns_after(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("RAGDOLL_TEST_SET", "before")
    monkeypatch.delenv("RAGDOLL_TEST_ABSENT", raising=False)
    with environment({"RAGDOLL_TEST_SET": "inside", "RAGDOLL_TEST_ABSENT": "1"}):
        assert os.environ["RAGDOLL_TEST_SET"] == "inside"
        assert os.environ["RAGDOLL_TEST_ABSENT"] == "1"
    assert os.environ["RAGDOLL_TEST_SET"] == "before"
    assert "RAGDOLL_TEST_ABSENT" not in os.environ


def test_the_earlier_state_returns_when_the_block_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RAGDOLL_TEST_ABSENT", raising=False)
    with pytest.raises(RuntimeError), environment({"RAGDOLL_TEST_ABSENT": "1"}):
        raise RuntimeError("boom")
    assert "RAGDOLL_TEST_ABSENT" not in os.environ
