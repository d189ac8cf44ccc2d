"""Fixtures shared by every test. Nothing here touches the real user folders."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")


@pytest.fixture
def ragdoll_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A private RAGDOLL_HOME for one test."""
    home = tmp_path / "ragdoll-home"
    monkeypatch.setenv("RAGDOLL_HOME", str(home))
    yield home
