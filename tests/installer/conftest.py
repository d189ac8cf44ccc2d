"""One quick bundle (no wheelhouse, no tarball) for every quick installer test."""

from __future__ import annotations

from pathlib import Path

import pytest

from installer.linux.build_bundle import build


@pytest.fixture(scope="session")
def quick_bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build(out=tmp_path_factory.mktemp("dist"), wheelhouse=False, tarball=False)
