#!/usr/bin/env bash
# Start the desktop app in a real X window (Xvfb) with a small clip and a source photo, take a
# screenshot, and check that the window is up and the picture is not blank.
#   bash scripts/gui_smoke.sh [SCREENSHOT.png]
# Skips (exit 0) when Xvfb, xwininfo or imagemagick are missing.
set -u
cd "$(dirname "$0")/.."
shot=${1:-}
for tool in Xvfb xwininfo import convert; do
  if ! command -v "$tool" >/dev/null; then
    echo "gui smoke: skipped ($tool not installed; apt-get install xvfb x11-utils imagemagick)"
    exit 0
  fi
done
PY=.venv/bin/python
work=$(mktemp -d /tmp/ffdesk-gui-smoke.XXXXXX)
trap 'rm -rf "$work"' EXIT
export XDG_CONFIG_HOME=$work/config XDG_DATA_HOME=$work/data XDG_CACHE_HOME=$work/cache
kept_shot=$shot  # (the work folder, with a screenshot nobody asked for, goes when the script ends)
[ -n "$shot" ] || shot=$work/shot.png
clip=$work/clip.mp4
"$PY" - "$clip" <<'EOF'
import sys
from pathlib import Path

import cv2

from ffdesk.media.images import read_image
from ffdesk.media.synth import synth_clip

face = cv2.resize(read_image(Path("resources/sample/astronaut.jpg"))[0:300, 120:400], (140, 150))
synth_clip(Path(sys.argv[1]), width=640, height=360, fps=25.0, frames=50, face_image=face)
EOF
[ -s "$clip" ] || { echo "gui smoke: FAILED to make a clip"; exit 1; }

for n in $(seq 90 130); do [ -e /tmp/.X11-unix/X$n ] || [ -e /tmp/.X$n-lock ] || break; done
Xvfb ":$n" -screen 0 1600x1000x24 -nolisten tcp >/dev/null 2>&1 &
xvfb=$!
app=""
cleanup() {
  [ -n "$app" ] && kill "$app" 2>/dev/null
  sleep 0.5
  [ -n "$app" ] && kill -9 "$app" 2>/dev/null
  kill "$xvfb" 2>/dev/null
  wait 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
export DISPLAY=":$n"
for _ in $(seq 1 50); do xwininfo -root >/dev/null 2>&1 && break; sleep 0.1; done

QT_QPA_PLATFORM=xcb .venv/bin/ffdesk gui "$clip" --source resources/sample/grace_hopper.jpg \
  >"$work/app.log" 2>&1 &
app=$!
up=""
for _ in $(seq 1 60); do
  if xwininfo -root -tree 2>/dev/null | grep -q '"ffdesk'; then up=1; break; fi
  kill -0 "$app" 2>/dev/null || break
  sleep 0.5
done
if [ -z "$up" ]; then
  echo "gui smoke: FAILED: no ffdesk window appeared"; tail -20 "$work/app.log"; exit 1
fi
sleep "${FFDESK_SMOKE_SETTLE_S:-6}"  # first preview, source detection, a few graph samples
import -window root "$shot"
spread=$(convert "$shot" -colorspace Gray -format '%[fx:standard_deviation]' info: 2>/dev/null || echo 0)
kill -0 "$app" 2>/dev/null || { echo "gui smoke: FAILED: the app exited"; tail -20 "$work/app.log"; exit 1; }
if ! awk -v s="$spread" 'BEGIN { exit !(s > 0.05) }'; then
  echo "gui smoke: FAILED: the screenshot is blank (grey spread $spread)"; exit 1
fi
title=$(xwininfo -root -tree | grep -o '"ffdesk[^"]*"' | head -1)
echo "gui smoke: ok: window $title is up${kept_shot:+; screenshot $kept_shot} (grey spread $spread)"
