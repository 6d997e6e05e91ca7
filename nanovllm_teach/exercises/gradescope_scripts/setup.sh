#!/usr/bin/env bash
# Gradescope runs this once, as root, with this bundle unpacked in $ROOT/source.
set -euo pipefail
ROOT="${AUTOGRADER_ROOT:-/autograder}"
PYTHON="${PYTHON:-python3}"
apt-get update -q
apt-get install -y -q bubblewrap python3-venv
"$PYTHON" -m venv "$ROOT/venv"
# torch's CPU build first (the README's pin): the package's torch range is then already met, with no GPU build.
"$ROOT/venv/bin/python" -m pip install -q torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu
"$ROOT/venv/bin/python" -m pip install -q "$ROOT/source/nanovllm-teach"
