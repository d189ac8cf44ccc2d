from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from native.desktop_entry import (
    app_entry,
    autostart_entry,
    exec_line,
    exec_quote,
    kde_service_menu,
    nautilus_script,
    nemo_action,
)

WEIRD = Path("/home/ann o'neil/.local/share/ragdoll-desktop/venv/bin/ragdoll")


def validate(tmp_path: Path, name: str, text: str) -> None:
    tool = shutil.which("desktop-file-validate")
    if tool is None:
        pytest.skip("desktop-file-validate is not installed (apt-get install desktop-file-utils)")
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    result = subprocess.run([tool, str(path)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "error" not in result.stdout.lower(), result.stdout


def unescape_exec(value: str) -> list[str]:
    """How a launcher reads an Exec value (Desktop Entry spec): string unescaping,
    then arguments split on spaces, double quotes grouping, and inside quotes a
    backslash taking the next character literally."""
    value = value.replace("\\\\", "\\")
    args: list[str] = []
    current: str | None = None
    quoted = escaped = False
    for ch in value:
        if escaped:
            current = (current or "") + ch
            escaped = False
        elif quoted and ch == "\\":
            escaped = True
        elif ch == '"':
            quoted = not quoted
            current = current or ""
        elif ch == " " and not quoted:
            if current is not None:
                args.append(current)
            current = None
        else:
            current = (current or "") + ch
    if current is not None:
        args.append(current)
    return args


def test_plain_arguments_stay_bare_and_percent_is_doubled() -> None:
    assert exec_quote("/usr/bin/ragdoll") == "/usr/bin/ragdoll"
    assert exec_quote("50%") == "50%%"


def test_arguments_with_spaces_and_quotes_round_trip_through_the_spec_rules() -> None:
    value = exec_line(argv=[str(WEIRD), "open"], field_code="%F")
    assert value.endswith(" open %F")
    assert unescape_exec(value)[:2] == [str(WEIRD), "open"]
    nasty = '/opt/a "b" $c `d` \\e/ragdoll'
    assert unescape_exec(exec_line(argv=[nasty]))[0] == nasty


@pytest.mark.parametrize("launcher", [Path("/opt/ragdoll/venv/bin/ragdoll"), WEIRD])
def test_the_app_entry_passes_desktop_file_validate(tmp_path: Path, launcher: Path) -> None:
    text = app_entry(launcher=launcher)
    validate(tmp_path, "ragdoll.desktop", text)
    assert "Icon=ragdoll\n" in text and "MimeType=application/pdf;" in text
    assert "Actions=ask-folder;add-samples;" in text


def test_the_autostart_entry_runs_the_engine_and_validates(tmp_path: Path) -> None:
    text = autostart_entry(launcher=WEIRD)
    validate(tmp_path, "ragdoll-engine.desktop", text)
    exec_value = next(line for line in text.splitlines() if line.startswith("Exec="))[5:]
    assert unescape_exec(exec_value) == [str(WEIRD), "engine"]


def test_file_manager_actions_target_folders_and_run_open() -> None:
    kde = kde_service_menu(launcher=WEIRD)
    assert "MimeType=inode/directory;" in kde and "Ask RAGDoll about this folder" in kde
    nemo = nemo_action(launcher=WEIRD)
    assert "Extensions=dir;" in nemo and " open %F" in nemo


def test_the_nautilus_script_passes_the_selection_or_the_current_folder(tmp_path: Path) -> None:
    fake = tmp_path / "it's ragdoll"
    log = tmp_path / "args"
    fake.write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" > "{log}"\n')
    fake.chmod(0o755)
    script = tmp_path / "script"
    script.write_text(nautilus_script(launcher=fake))
    script.chmod(0o755)
    subprocess.run([str(script), "/a b/c"], check=True, cwd=tmp_path)
    assert log.read_text().splitlines() == ["open", "/a b/c"]
    subprocess.run([str(script)], check=True, cwd=tmp_path)
    assert log.read_text().splitlines() == ["open", str(tmp_path)]
