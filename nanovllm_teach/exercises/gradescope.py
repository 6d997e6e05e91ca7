"""Gradescope's autograder bundle for one exercise: a class graded on Gradescope's machines.

Role: grading (the teacher's side). Emits no events.

The layout is Gradescope's ("Autograder Specifications"): ``setup.sh`` runs once as the image is built,
``run_autograder`` once per submission. It prints ``grade --check-isolation`` first, as the teacher's evidence
of what that machine gave the sandbox. Both scripts take the root from ``AUTOGRADER_ROOT`` and the Python from
``PYTHON``, so that they can be tried in a throwaway folder.
"""

from __future__ import annotations

import shlex
import zipfile
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[2]
TORCH = "torch==2.13.0"
TORCH_INDEX = "https://download.pytorch.org/whl/cpu"

SETUP = """#!/usr/bin/env bash
# Gradescope runs this once, as root, with this bundle unpacked in $ROOT/source.
set -euo pipefail
ROOT="${{AUTOGRADER_ROOT:-/autograder}}"
PYTHON="${{PYTHON:-python3}}"
apt-get update -q
apt-get install -y -q bubblewrap python3-venv
"$PYTHON" -m venv "$ROOT/venv"
"$ROOT/venv/bin/python" -m pip install -q {torch} --index-url {index}
"$ROOT/venv/bin/python" -m pip install -q "$ROOT/source/nanovllm-teach"
"""

RUN = """#!/usr/bin/env bash
# Gradescope runs this for each submission: the student's files are in $ROOT/submission.
set -uo pipefail
ROOT="${{AUTOGRADER_ROOT:-/autograder}}"
GRADER="${{NANOVLLM_TEACH:-$ROOT/venv/bin/nanovllm-teach}}"
mkdir -p "$ROOT/results"
chmod 755 "$ROOT/results"  # the grader's only: a submission's user id cannot write here
export HF_HUB_OFFLINE=1
"$GRADER" grade --check-isolation  # what this machine gives the sandbox, in the output the teacher sees
"$GRADER" grade {exercise} "$ROOT/submission" --gradescope "$ROOT/results/results.json"
status=$?
# A verdict (exit 0 or 1) and a refusal (exit 2) leave their results.json; a crash leaves none: say so.
if [ ! -s "$ROOT/results/results.json" ]; then
    printf '{{"score": 0, "output": "the autograder failed (exit %s): ask your teacher", "tests": []}}\\n' \\
        "$status" > "$ROOT/results/results.json"
fi
"""

def _script(zip_file: zipfile.ZipFile, name: str, text: str) -> None:
    info = zipfile.ZipInfo(name)
    info.external_attr = 0o755 << 16  # executable, as Gradescope runs it
    info.compress_type = zipfile.ZIP_DEFLATED
    zip_file.writestr(info, text)


def write_bundle(exercise: str, path: Path) -> None:
    """The autograder bundle grading ``exercise``, written to ``path`` (a .zip)."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zip_file:
        _script(zip_file, "setup.sh", SETUP.format(torch=TORCH, index=TORCH_INDEX))
        _script(zip_file, "run_autograder", RUN.format(exercise=shlex.quote(exercise)))
        # The package's source, as ``pip install`` needs it: no caches.
        for name in ("pyproject.toml", "README.md"):
            zip_file.write(REPOSITORY / name, f"nanovllm-teach/{name}")
        for source in sorted((REPOSITORY / "nanovllm_teach").rglob("*")):
            if source.is_file() and "__pycache__" not in source.parts:
                zip_file.write(source, f"nanovllm-teach/{source.relative_to(REPOSITORY).as_posix()}")
