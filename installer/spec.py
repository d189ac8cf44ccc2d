"""installer/app_spec.toml, read and checked into one frozen value."""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

SPEC_FILE = Path(__file__).with_name("app_spec.toml")
REPO = Path(__file__).resolve().parent.parent


@dataclass(frozen=True, kw_only=True)
class Association:
    extension: str
    mime_type: str
    description: str


@dataclass(frozen=True, kw_only=True)
class AppSpec:
    name: str
    app_id: str
    reverse_dns: str
    version: str
    publisher: str
    comment: str
    license: str
    homepage: str
    python_min: str
    windows_app_guid: str
    icon_svg: Path
    icon_png_dir: Path
    cli: str
    gui_args: tuple[str, ...]
    ask_folder_args: tuple[str, ...]
    engine_args: tuple[str, ...]
    associations: tuple[Association, ...]

    @property
    def extensions(self) -> tuple[str, ...]:
        return tuple(a.extension for a in self.associations)

    @property
    def mime_types(self) -> tuple[str, ...]:
        """Each MIME type once, in the spec's order (.md and .markdown share one)."""
        return tuple(dict.fromkeys(a.mime_type for a in self.associations))


def load_spec(*, file: Path = SPEC_FILE, repo: Path = REPO) -> AppSpec:
    try:
        raw = tomllib.loads(file.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise ValueError(f"{file}: {e}") from e
    try:
        app, icon, entry = raw["app"], raw["icon"], raw["entry_points"]
        spec = AppSpec(
            name=app["name"],
            app_id=app["id"],
            reverse_dns=app["reverse_dns"],
            version=app["version"],
            publisher=app["publisher"],
            comment=app["comment"],
            license=app["license"],
            homepage=app["homepage"],
            python_min=app["python_min"],
            windows_app_guid=app["windows_app_guid"],
            icon_svg=repo / icon["svg"],
            icon_png_dir=repo / icon["png_dir"],
            cli=entry["cli"],
            gui_args=tuple(entry["gui_args"]),
            ask_folder_args=tuple(entry["ask_folder_args"]),
            engine_args=tuple(entry["engine_args"]),
            associations=tuple(Association(**a) for a in raw.get("associations", [])),
        )
    except (KeyError, TypeError) as e:
        raise ValueError(f"{file}: missing or wrong field ({e})") from e
    _check(spec=spec, file=file)
    return spec


def _check(*, spec: AppSpec, file: Path) -> None:
    problems = []
    if not re.fullmatch(r"\d+\.\d+\.\d+", spec.version):
        problems.append(f"version {spec.version!r} is not MAJOR.MINOR.PATCH")
    if not re.fullmatch(r"[a-z][a-z0-9-]*", spec.app_id):
        problems.append(f"id {spec.app_id!r}: lower-case letters, digits and '-' only")
    if not re.fullmatch(r"[0-9A-F]{8}(-[0-9A-F]{4}){3}-[0-9A-F]{12}", spec.windows_app_guid):
        problems.append("windows_app_guid is not an upper-case GUID")
    if not spec.icon_svg.is_file():
        problems.append(f"icon {spec.icon_svg} does not exist")
    for a in spec.associations:
        if not a.extension.startswith(".") or "/" not in a.mime_type:
            problems.append(f"association {a.extension} {a.mime_type} is malformed")
    if problems:
        raise ValueError(f"{file}: " + "; ".join(problems))


def pyproject_version(*, repo: Path = REPO) -> str:
    return tomllib.loads((repo / "pyproject.toml").read_text(encoding="utf-8"))["project"][
        "version"
    ]
