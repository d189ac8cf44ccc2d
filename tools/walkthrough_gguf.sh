#!/usr/bin/env bash
# A downloaded GGUF file in the real window (issue #20's check): Xvfb + openbox, the
# real `ragdoll open FOLDER`, then Model > Choose a GGUF model file… and the file typed
# into Qt's file dialog as a person would, a question at 1000x700 and maximized, the
# Recommended models dialog's GGUF line, and a source opened. Look at every screenshot.
#
#   tools/walkthrough_gguf.sh FOLDER FILE.gguf OUT [WxH]
#
# Needs what tools/walkthrough.sh needs. Uses a fresh RAGDOLL_HOME under OUT.
set -euo pipefail
folder=$(realpath "$1"); gguf=$(realpath "$2"); out=$(realpath -m "$3"); size=${4:-1920x1080}
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
export DISPLAY=$display QT_QPA_PLATFORM=xcb RAGDOLL_HOME=$out/home RAGDOLL_THEME=light
n=0
shot() { n=$((n + 1)); import -window root "$out/$(printf %02d "$n")-$1.png"; echo "  $(date +%T) $out/$(printf %02d "$n")-$1.png"; }
wait_for() { # a window title, up to $2 seconds
    for _ in $(seq "$2"); do wmctrl -l 2>/dev/null | grep -q "$1" && return 0; sleep 1; done
    echo "no window '$1' after $2 s" >&2; return 1
}
say() { xdotool type --delay 20 "$1"; xdotool key Return; }

echo "1. 'ragdoll open $folder' on a fresh home, Get started, the documents go in"
"$python" -m app.cli open "$folder" >>"$out/app.log" 2>&1 & app=$!
wait_for "Welcome to RAGDoll" 180
sleep 1; shot welcome
xdotool key Return
sleep "${SETTLE_S:-40}"; shot indexed

echo "2. at 1000x700: Model > Choose a GGUF model file…, the file typed in the dialog"
wmctrl -r RAGDoll -e 0,0,0,1000,700; sleep 2
xdotool key alt+m; sleep 1; xdotool key Down Down; sleep 0.5; shot model-menu
xdotool key Return; sleep 3; shot file-dialog
xdotool type --delay 10 "$gguf"; xdotool key Return
sleep 25; shot model-chosen

echo "3. a question at 1000x700, then maximized, then a second question"
say "How do I start a git bisect?"
sleep 30; shot answer-1000x700
wmctrl -r RAGDoll -b add,maximized_vert,maximized_horz; sleep 4; shot answer-maximized
say "How do I pin a package version with apt?"
sleep 30; shot second-answer-maximized

echo "4. the first source opened (a click on [1]), then the Recommended models dialog"
read -r width height <<<"$(xdotool getdisplaygeometry)"
xdotool mousemove $((width * 70 / 100)) $((height * 635 / 1000)) click 1; sleep 4; shot source
xdotool key Escape; sleep 1
xdotool key alt+m; sleep 1; xdotool key Return; sleep 6
xdotool key Tab Down Down; sleep 2; shot recommended-models
xdotool key Escape; sleep 1

xdotool key ctrl+q; wait "$app" || true; app=
