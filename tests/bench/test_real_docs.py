"""The real documents' fetcher as `make test` runs it first: a download that cannot
finish ends within its time and says so, without failing the run's later steps."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from bench import real_docs


def test_a_download_past_its_time_is_ended_and_reported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(real_docs.shutil, "which", lambda name: f"/usr/bin/{name}")
    seen: dict[str, Any] = {}

    def stuck(cmd: list[str], **kw: Any) -> None:
        seen.update(kw, cmd=cmd)
        raise subprocess.TimeoutExpired(cmd, kw["timeout"])

    monkeypatch.setattr(real_docs.subprocess, "run", stuck)
    assert real_docs.main(["--dir", str(tmp_path), "--quiet", "--timeout", "7"]) == 1
    assert seen["cmd"][:2] == ["apt-get", "download"] and seen["timeout"] == 7
    assert seen["stdout"] == subprocess.DEVNULL
    assert "could not fetch the real documents" in capsys.readouterr().err
    assert real_docs.find_real_docs(root=tmp_path) is None


def test_without_apt_the_fetch_says_what_it_needs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(real_docs.shutil, "which", lambda name: None)
    assert real_docs.main(["--dir", str(tmp_path), "--timeout", "1"]) == 1
    assert "needs apt-get and dpkg" in capsys.readouterr().err
