"""Render the shared spec into each platform's recipe.

    python -m installer.render --out build/installer [--bundle dist/ragdoll-0.1.0-linux]

writes windows/ (Inno Setup script and .ico) and macos/ (Info.plist, the .app's
launcher, build-dmg.sh, .icns). With --bundle, the platform-neutral bundle (the
app's wheel, requirements, pure wheels, install.py) is copied beside each recipe,
so that the folder is all a Windows or macOS build machine needs.
"""

from __future__ import annotations

import argparse
import plistlib
import re
import shutil
import struct
import sys
from pathlib import Path

from installer.spec import AppSpec, load_spec
from native.identity import IDENTITY

HERE = Path(__file__).resolve().parent
_PLACEHOLDER = re.compile(r"@([a-z_]+)@")


def fill(*, template: str, values: dict[str, str]) -> str:
    """Replace every @key@; an unknown key is an error, never left in the output."""

    def one(match: re.Match[str]) -> str:
        key = match.group(1)
        if key not in values:
            raise KeyError(f"template placeholder @{key}@ has no value")
        return values[key]

    return _PLACEHOLDER.sub(one, template)


def template_values(*, spec: AppSpec) -> dict[str, str]:
    major, minor = spec.python_min.split(".")[:2]
    iss_lines = []
    for a in spec.associations:
        iss_lines.append(
            f'Root: HKCU; Subkey: "Software\\Classes\\{a.extension}\\OpenWithProgids"; '
            f'ValueType: string; ValueName: "{spec.name}.Document"; ValueData: ""; '
            "Flags: uninsdeletevalue"
        )
    return {
        "name": spec.name,
        "app_id": spec.app_id,
        "version": spec.version,
        "publisher": spec.publisher,
        "homepage": spec.homepage,
        "comment": spec.comment,
        "windows_app_guid": spec.windows_app_guid,
        "python_min": spec.python_min,
        "python_min_tuple": f"{major}, {minor}",
        "cli": spec.cli,
        "gui_args": " ".join(spec.gui_args),
        "ask_folder_args": " ".join(spec.ask_folder_args),
        "engine_args": " ".join(spec.engine_args),
        "ask_folder_label": IDENTITY.ask_folder_label,
        "registry_associations": "\n".join(iss_lines),
    }


def info_plist(*, spec: AppSpec) -> bytes:
    return plistlib.dumps(
        {
            "CFBundleName": spec.name,
            "CFBundleDisplayName": spec.name,
            "CFBundleIdentifier": spec.reverse_dns,
            "CFBundleVersion": spec.version,
            "CFBundleShortVersionString": spec.version,
            "CFBundleExecutable": spec.name,
            "CFBundleIconFile": f"{spec.app_id}.icns",
            "CFBundlePackageType": "APPL",
            "LSMinimumSystemVersion": "12.0",
            "NSHighResolutionCapable": True,
            "CFBundleDocumentTypes": [
                {
                    "CFBundleTypeName": a.description,
                    "CFBundleTypeExtensions": [a.extension.lstrip(".")],
                    "CFBundleTypeMIMETypes": [a.mime_type],
                    "CFBundleTypeRole": "Viewer",
                    "LSHandlerRank": "Alternate",  # offered in "Open With", never the default
                }
                for a in spec.associations
            ],
        },
        sort_keys=False,
    )


def _pngs(*, spec: AppSpec) -> dict[int, bytes]:
    found = {}
    for path in spec.icon_png_dir.glob(f"*/apps/{spec.app_id}.png"):
        size = int(path.parent.parent.name.split("x")[0])
        found[size] = path.read_bytes()
    if not found:
        raise FileNotFoundError(f"no PNGs under {spec.icon_png_dir}; run python -m native.icons")
    return found


def ico_bytes(*, pngs: dict[int, bytes]) -> bytes:
    """A Windows .ico holding PNG images (Vista and later read PNG entries)."""
    sizes = sorted(s for s in pngs if s <= 256)
    header = struct.pack("<HHH", 0, 1, len(sizes))
    offset = len(header) + 16 * len(sizes)
    entries, data = b"", b""
    for size in sizes:
        blob = pngs[size]
        dim = 0 if size == 256 else size  # 0 means 256 in the ICO directory
        entries += struct.pack("<BBBBHHII", dim, dim, 0, 0, 1, 32, len(blob), offset + len(data))
        data += blob
    return header + entries + data


# ICNS element types that hold PNG data, by pixel size.
_ICNS_TYPES = {16: b"icp4", 32: b"icp5", 64: b"icp6", 128: b"ic07", 256: b"ic08", 512: b"ic09"}


def icns_bytes(*, pngs: dict[int, bytes]) -> bytes:
    body = b""
    for size, kind in _ICNS_TYPES.items():
        if size in pngs:
            body += kind + struct.pack(">I", 8 + len(pngs[size])) + pngs[size]
    return b"icns" + struct.pack(">I", 8 + len(body)) + body


def render(*, out: Path, spec: AppSpec, bundle: Path | None = None) -> list[Path]:
    """Write every platform's recipe under `out`; returns the files written."""
    values = template_values(spec=spec)
    pngs = _pngs(spec=spec)
    files: dict[Path, bytes] = {
        out / "windows" / f"{spec.app_id}.iss": fill(
            template=(HERE / "windows" / "ragdoll.iss.in").read_text(encoding="utf-8"),
            values=values,
        ).encode("utf-8"),
        out / "windows" / f"{spec.app_id}.ico": ico_bytes(pngs=pngs),
        out / "macos" / "Info.plist": info_plist(spec=spec),
        out / "macos" / f"{spec.app_id}.icns": icns_bytes(pngs=pngs),
    }
    for name in ("launcher.sh", "build-dmg.sh"):
        text = (HERE / "macos" / f"{name}.in").read_text(encoding="utf-8")
        files[out / "macos" / name] = fill(template=text, values=values).encode("utf-8")
    written = []
    for path, blob in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(blob)
        if path.suffix == ".sh":
            path.chmod(0o755)
        written.append(path)
    if bundle is not None:
        for platform_dir in ("windows", "macos"):
            target = out / platform_dir / "bundle"
            shutil.rmtree(target, ignore_errors=True)
            shutil.copytree(bundle, target)
            written.append(target)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m installer.render")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--bundle", type=Path, default=None, help="a built bundle to copy in")
    args = parser.parse_args(argv)
    for path in render(out=args.out, spec=load_spec(), bundle=args.bundle):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
