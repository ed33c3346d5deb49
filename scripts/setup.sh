#!/usr/bin/env bash
# Set up everything ffdesk needs on a fresh Debian machine: system libraries for Qt and media
# tools, a virtual environment in .venv, and the project with its dev extras. Idempotent: a second
# run with an unchanged pyproject.toml takes a second.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(libegl1 libgl1 libfontconfig1 libfreetype6 libglib2.0-0 libx11-6 libxkbcommon0 libdbus-1-3
  libxcb-cursor0 libxcb-icccm4 libxcb-keysyms1 libxcb-image0 libxcb-randr0 libxcb-render-util0
  libxcb-shape0 libxcb-xkb1 libxkbcommon-x11-0 libx11-xcb1 xvfb xauth imagemagick ffmpeg espeak-ng)

missing=()
if command -v dpkg-query >/dev/null; then
  for p in "${APT_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
  done
fi
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    echo "setup: installing system packages: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  else
    echo "setup: please install these system packages: ${missing[*]}" >&2
  fi
fi

PY=${PYTHON:-python3.11}
command -v "$PY" >/dev/null || PY=python3
stamp=.venv/.ffdesk-installed
want=$(sha256sum pyproject.toml | cut -c1-16)
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "setup: installing ffdesk and its dependencies into .venv"
  log=.venv/pip-install.log
  if ! { .venv/bin/python -m pip install -q --upgrade pip && .venv/bin/python -m pip install -q -e '.[dev,farm,quality]'; } >"$log" 2>&1; then
    grep -v "^WARNING: Location" "$log" | tail -30
    echo "setup: pip install failed (full log: $log)" >&2
    exit 1
  fi
  .venv/bin/python -c "import ffdesk, av, cv2, onnxruntime, PySide6, torch, ray, kubernetes_validate" 
  echo "$want" > "$stamp"
fi
