#!/bin/sh
# RAGDoll installer: the one step. Double-click ("Run as a program") or run ./install.sh.
# Options go to install.py (--help lists them). Needs Python 3.11 or newer.
HERE="$(cd "$(dirname "$0")" && pwd)"
for candidate in python3.13 python3.12 python3.11 python3; do
  if command -v "$candidate" >/dev/null 2>&1 &&
     "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
    exec "$candidate" "$HERE/install.py" "$@"
  fi
done
echo "RAGDoll needs Python 3.11 or newer (Debian/Ubuntu: sudo apt install python3 python3-venv)." >&2
if command -v notify-send >/dev/null 2>&1; then
  notify-send "RAGDoll" "Needs Python 3.11 or newer: sudo apt install python3 python3-venv"
fi
exit 1
