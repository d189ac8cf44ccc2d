"""Text of the Linux integration files: the app's .desktop entry, the login
autostart entry, and the file-manager actions for "Ask RAGDoll about this folder".

Pure functions of the launcher path and the app identity, so every file is tested
as text (and the .desktop ones with desktop-file-validate) without a desktop.
"""

from __future__ import annotations

from pathlib import Path

from native.identity import IDENTITY, AppIdentity

# Characters that force an Exec argument into double quotes (Desktop Entry spec,
# "The Exec key"); inside quotes, these four need a backslash.
_RESERVED = set(" \t\n\"'\\><~|&;$*?#()`")
_ESCAPE_IN_QUOTES = ("\\", '"', "`", "$")


def exec_quote(arg: str) -> str:
    """One Exec argument, quoted by the spec's rules; a literal % is doubled."""
    arg = arg.replace("%", "%%")
    if not any(ch in _RESERVED for ch in arg) and arg:
        return arg
    for ch in _ESCAPE_IN_QUOTES:
        arg = arg.replace(ch, "\\" + ch)
    return f'"{arg}"'


def exec_line(*, argv: list[str], field_code: str | None = None) -> str:
    """An Exec value: quoted arguments, then an optional field code such as %F.

    The value is also a desktop-file string, where a backslash is written twice."""
    parts = [exec_quote(a) for a in argv]
    if field_code:
        parts.append(field_code)
    return " ".join(parts).replace("\\", "\\\\")


def _list(values: tuple[str, ...]) -> str:
    return "".join(f"{v};" for v in values)


def app_entry(
    *, launcher: Path, uninstaller: Path | None = None, identity: AppIdentity = IDENTITY
) -> str:
    """The application's .desktop entry: the menu item, "Open with", and its actions
    (with *Uninstall* where the install is the person's own, not a package's)."""
    exe = str(launcher)
    actions = "ask-folder;add-samples;" + ("uninstall;" if uninstaller else "")
    uninstall = (
        [
            "[Desktop Action uninstall]",
            f"Name=Uninstall {identity.name}…",
            f"Exec={exec_line(argv=[str(uninstaller), '--gui'])}",
            "",
        ]
        if uninstaller
        else []
    )
    return "\n".join(
        [
            "[Desktop Entry]",
            "Type=Application",
            "Version=1.4",
            f"Name={identity.name}",
            f"GenericName={identity.generic_name}",
            f"Comment={identity.comment}",
            f"Exec={exec_line(argv=[exe, 'open'], field_code='%F')}",
            f"TryExec={exe}",
            f"Icon={identity.app_id}",
            "Terminal=false",
            f"Categories={_list(identity.categories)}",
            f"Keywords={_list(identity.keywords)}",
            f"MimeType={_list(identity.mime_types)}",
            "StartupNotify=true",
            f"Actions={actions}",
            "",
            "[Desktop Action ask-folder]",
            "Name=Ask about a folder…",
            f"Exec={exec_line(argv=[exe, 'open', '--choose-folder'])}",
            "",
            "[Desktop Action add-samples]",
            "Name=Open with the sample collection",
            f"Exec={exec_line(argv=[exe, 'open', '--samples'])}",
            "",
            *uninstall,
        ]
    )


def autostart_entry(*, launcher: Path, identity: AppIdentity = IDENTITY) -> str:
    """XDG autostart: the engine, headless, so watched folders stay indexed."""
    return "\n".join(
        [
            "[Desktop Entry]",
            "Type=Application",
            "Version=1.4",
            f"Name={identity.name} engine",
            "Comment=Keeps watched folders indexed in the background",
            f"Exec={exec_line(argv=[str(launcher), 'engine'])}",
            f"TryExec={launcher}",
            f"Icon={identity.app_id}",
            "Terminal=false",
            "NoDisplay=true",
            "X-GNOME-Autostart-enabled=true",
            "",
        ]
    )


def kde_service_menu(*, launcher: Path, identity: AppIdentity = IDENTITY) -> str:
    """Dolphin's context menu on folders (KIO service menu, Plasma 5.22 and later)."""
    return "\n".join(
        [
            "[Desktop Entry]",
            "Type=Service",
            "MimeType=inode/directory;",
            "X-KDE-ServiceTypes=KonqPopupMenu/Plugin",
            "Actions=ask-ragdoll;",
            "",
            "[Desktop Action ask-ragdoll]",
            f"Name={identity.ask_folder_label}",
            f"Icon={identity.app_id}",
            f"Exec={exec_line(argv=[str(launcher), 'open'], field_code='%F')}",
            "",
        ]
    )


def nemo_action(*, launcher: Path, identity: AppIdentity = IDENTITY) -> str:
    """Nemo (Cinnamon) context-menu action on folders."""
    return "\n".join(
        [
            "[Nemo Action]",
            f"Name={identity.ask_folder_label}",
            f"Comment={identity.comment}",
            f"Exec={exec_line(argv=[str(launcher), 'open'], field_code='%F')}",
            f"Icon-Name={identity.app_id}",
            "Selection=notnone",
            "Extensions=dir;",
            "",
        ]
    )


def nautilus_script(*, launcher: Path) -> str:
    """A Nautilus (GNOME Files) script: Scripts ▸ Ask RAGDoll about this folder.

    Nautilus passes the selected items as arguments and runs the script in the
    folder being shown, so no selection means "this folder"."""
    quoted = "'" + str(launcher).replace("'", "'\\''") + "'"
    return "\n".join(
        [
            "#!/bin/sh",
            "# Installed by RAGDoll; removed by its uninstaller.",
            'if [ "$#" -eq 0 ]; then set -- "$(pwd)"; fi',
            f'exec {quoted} open "$@"',
            "",
        ]
    )
