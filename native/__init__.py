"""Per-OS integration: desktop entries, icons, file-manager actions, opening a
document at a page, and starting the engine at login.

Linux is implemented and tested end to end (in a temporary HOME); the macOS and
Windows parts are generated text, unit-tested, and used by the installer recipes.
"""

from native.open_page import ViewerCommand, open_at_page, viewer_command

__all__ = ["ViewerCommand", "open_at_page", "viewer_command"]
