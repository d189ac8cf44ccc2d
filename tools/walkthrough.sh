#!/usr/bin/env bash
# The window as a new user meets it, on a real X display (issue #22's check):
# Xvfb + openbox, the real `ragdoll open FOLDER` (real engine, embedder, parsers),
# driven with the keyboard through xdotool, maximized with wmctrl; a screenshot
# after each step. Look at every one of them.
#
#   tools/walkthrough.sh FOLDER OUT [WxH] [light|dark]
#   tools/walkthrough.sh /work/realdocs/cache/corpus /tmp/walk 2560x1440 dark
#
# Needs: Xvfb, openbox, xdotool, wmctrl, ImageMagick's import (Debian: apt-get
# install xvfb openbox xdotool wmctrl imagemagick). Uses a fresh RAGDOLL_HOME under
# OUT, so the person's own library is never touched. Run from the repository root.
set -euo pipefail
folder=$(realpath "$1"); out=$(realpath -m "$2"); size=${3:-1400x900}; theme=${4:-light}
python=${PYTHON:-python3}
mkdir -p "$out"; rm -rf "$out/home"
display=:$((90 + RANDOM % 100))
Xvfb "$display" -screen 0 "${size}x24" -nolisten tcp >"$out/xvfb.log" 2>&1 &
xvfb=$!
sleep 1
DISPLAY=$display openbox >"$out/openbox.log" 2>&1 &
wm=$!
app=
cleanup() {
    [ -n "$app" ] && kill "$app" 2>/dev/null && wait "$app" 2>/dev/null
    kill "$wm" "$xvfb" 2>/dev/null || true
}
trap cleanup EXIT
export DISPLAY=$display QT_QPA_PLATFORM=xcb RAGDOLL_HOME=$out/home RAGDOLL_THEME=$theme
n=0
shot() { n=$((n + 1)); import -window root "$out/$(printf %02d "$n")-$1.png"; echo "  $out/$(printf %02d "$n")-$1.png"; }
start() { "$python" -m app.cli "$@" >>"$out/app.log" 2>&1 & app=$!; }
wait_for() { # a window title, up to $2 seconds
    for _ in $(seq "$2"); do wmctrl -l 2>/dev/null | grep -q "$1" && return 0; sleep 1; done
    echo "no window '$1' after $2 s" >&2; return 1
}
say() { xdotool type --delay 20 "$1"; xdotool key Return; }

echo "1. 'ragdoll open $folder' on a fresh home: the welcome, samples unticked"
start open "$folder"
wait_for "Welcome to RAGDoll" 180
sleep 1; shot welcome
xdotool key Return  # presses the focused Get started, not a file picker
sleep 5; shot adding

echo "2. a question while the documents go in, then Ctrl+F with no match"
say "How do I search the command history in bash?"
sleep 30; shot answer
xdotool key ctrl+f; xdotool type --delay 30 "zzqxv"; sleep 2; shot no-match
xdotool key Escape; sleep 1

echo "3. maximized"
wmctrl -r RAGDoll -b add,maximized_vert,maximized_horz; sleep 3; shot maximized

echo "4. the hardware panel (true figures, no empty chart), the batch dialog"
xdotool key alt+h; sleep 0.5; xdotool key Return; sleep 4; shot hardware
xdotool key Escape; sleep 1
xdotool key ctrl+shift+b; sleep 3; shot batch-empty  # no "0 of 1" before a run
xdotool type --delay 20 "What does git rebase --onto do?"; xdotool key shift+Return
xdotool type --delay 20 "How do I pin a package version with apt?"; xdotool key ctrl+Return
sleep 20; shot batch-ran
xdotool key Escape; sleep 1

echo "5. once the documents are in: the finished box gone, the model note only once"
sleep "${SETTLE_S:-60}"; shot settled
say "How do I start a git bisect?"
sleep 15; shot second-answer

echo "6. quit and start again: the last conversation, the resumed job"
xdotool key ctrl+q; wait "$app" || true; app=
start
wait_for RAGDoll 60
sleep 25; shot restarted
