"""native/metainfo.py: the AppStream component software centres read."""

from __future__ import annotations

import shutil
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from native.identity import IDENTITY
from native.metainfo import metainfo_name, metainfo_xml


def test_the_component_names_the_entry_the_formats_and_the_release() -> None:
    root = ET.fromstring(metainfo_xml(version="0.1.0", date="2026-11-24"))
    assert root.get("type") == "desktop-application"
    assert root.findtext("id") == IDENTITY.reverse_dns
    assert root.findtext("launchable") == "ragdoll.desktop"
    assert [m.text for m in root.iter("mediatype")] == list(IDENTITY.mime_types)
    assert root.find("releases/release").get("version") == "0.1.0"  # type: ignore[union-attr]


def test_appstreamcli_validates_it(tmp_path: Path) -> None:
    if shutil.which("appstreamcli") is None:
        pytest.skip("appstreamcli is not installed (apt-get install appstream)")
    path = tmp_path / metainfo_name()
    path.write_text(metainfo_xml(version="0.1.0", date="2026-11-24"))
    result = subprocess.run(
        ["appstreamcli", "validate", "--no-net", str(path)], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr
