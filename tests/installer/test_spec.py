"""The shared spec and the Windows/macOS recipes rendered from it."""

from __future__ import annotations

import plistlib
import re
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from installer.render import fill, icns_bytes, ico_bytes, render
from installer.spec import load_spec, pyproject_version
from native.identity import IDENTITY


def test_the_spec_version_is_pyprojects() -> None:
    assert load_spec().version == pyproject_version()


def test_the_spec_and_the_native_identity_agree() -> None:
    spec = load_spec()
    assert (spec.name, spec.app_id, spec.reverse_dns, spec.comment) == (
        IDENTITY.name,
        IDENTITY.app_id,
        IDENTITY.reverse_dns,
        IDENTITY.comment,
    )
    assert spec.mime_types == IDENTITY.mime_types
    assert spec.cli == "ragdoll"
    pyproject = (Path(__file__).resolve().parents[2] / "pyproject.toml").read_text()
    assert 'ragdoll = "app.cli:main"' in pyproject


def test_a_broken_spec_is_a_clear_error(tmp_path: Path) -> None:
    text = (Path(__file__).resolve().parents[2] / "installer" / "app_spec.toml").read_text()
    bad = tmp_path / "spec.toml"
    bad.write_text(text.replace('version = "0.1.0"', 'version = "one"'))
    with pytest.raises(ValueError, match=r"MAJOR\.MINOR\.PATCH"):
        load_spec(file=bad)
    bad.write_text(text.replace("[entry_points]", "[nothing]"))
    with pytest.raises(ValueError, match="missing"):
        load_spec(file=bad)


def test_an_unknown_placeholder_is_an_error_not_left_in_the_output() -> None:
    assert fill(template="a @name@ b", values={"name": "X"}) == "a X b"
    with pytest.raises(KeyError, match="@nope@"):
        fill(template="@nope@", values={})


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("recipes")
    render(out=out, spec=load_spec())
    return out


def test_the_inno_setup_script_has_the_start_menu_shortcut_and_associations(
    rendered: Path,
) -> None:
    spec = load_spec()
    iss = (rendered / "windows" / "ragdoll.iss").read_text()
    assert not re.search(r"@[a-z_]+@", iss)
    assert f"AppVersion={spec.version}\n" in iss
    assert f"AppId={{{{{spec.windows_app_guid}}}\n" in iss
    assert re.search(r'^Name: "\{group\}\\RAGDoll"; Filename: .*pythonw\.exe', iss, re.M)
    assert "PrivilegesRequired=lowest" in iss
    for ext in spec.extensions:
        assert f"Software\\Classes\\{ext}\\OpenWithProgids" in iss
    assert "Directory\\shell\\RAGDoll" in iss  # Ask RAGDoll about this folder
    assert "{code:IndexChoice}" in iss and "--keep-index" in iss and "--remove-index" in iss
    # Every section Inno Setup needs is there, once.
    for section in ("[Setup]", "[Files]", "[Icons]", "[Run]", "[Registry]", "[Code]"):
        assert iss.count(section) == 1, section


def test_the_macos_app_plist_and_scripts(rendered: Path) -> None:
    spec = load_spec()
    plist = plistlib.loads((rendered / "macos" / "Info.plist").read_bytes())
    assert plist["CFBundleShortVersionString"] == spec.version
    assert plist["CFBundleIdentifier"] == spec.reverse_dns
    assert plist["CFBundleExecutable"] == spec.name
    exts = {e for t in plist["CFBundleDocumentTypes"] for e in t["CFBundleTypeExtensions"]}
    assert exts == {e.lstrip(".") for e in spec.extensions}
    assert {t["LSHandlerRank"] for t in plist["CFBundleDocumentTypes"]} == {"Alternate"}
    for script in ("launcher.sh", "build-dmg.sh"):
        text = (rendered / "macos" / script).read_text()
        assert not re.search(r"@[a-z_]+@", text)
        subprocess.run(["sh", "-n", str(rendered / "macos" / script)], check=True)
    assert "hdiutil create" in (rendered / "macos" / "build-dmg.sh").read_text()
    assert "--if-needed" in (rendered / "macos" / "launcher.sh").read_text()


def test_the_icons_are_well_formed(rendered: Path) -> None:
    ico = (rendered / "windows" / "ragdoll.ico").read_bytes()
    reserved, kind, count = struct.unpack("<HHH", ico[:6])
    assert (reserved, kind) == (0, 1) and count >= 5
    for i in range(count):
        _w, _h, _c, _r, _p, _b, size, offset = struct.unpack(
            "<BBBBHHII", ico[6 + 16 * i : 22 + 16 * i]
        )
        assert ico[offset : offset + 8] == b"\x89PNG\r\n\x1a\n" and offset + size <= len(ico)
    icns = (rendered / "macos" / "ragdoll.icns").read_bytes()
    assert icns[:4] == b"icns" and struct.unpack(">I", icns[4:8])[0] == len(icns)
    assert b"ic09" in icns  # 512 px


def test_ico_and_icns_writers_lay_out_entries() -> None:
    png = b"\x89PNG\r\n\x1a\n" + b"x" * 10
    ico = ico_bytes(pngs={16: png, 256: png, 512: png})
    assert struct.unpack("<H", ico[4:6])[0] == 2  # 512 does not fit an ICO entry
    assert ico[6 + 16] == 0  # 256 is written as 0
    icns = icns_bytes(pngs={16: png, 128: png})
    assert icns.count(b"\x89PNG") == 2 and b"icp4" in icns and b"ic07" in icns


@pytest.mark.skipif(shutil.which("iscc") is None, reason="Inno Setup (iscc) runs on Windows")
def test_iscc_compiles_the_script(rendered: Path) -> None:  # pragma: no cover - Windows only
    subprocess.run(["iscc", str(rendered / "windows" / "ragdoll.iss")], check=True)
