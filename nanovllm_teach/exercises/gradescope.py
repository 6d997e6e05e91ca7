"""Gradescope's autograder bundle for one exercise: a class graded on Gradescope's machines.

Role: grading (the teacher's side). Emits no events.

Gradescope unpacks the bundle into ``/autograder/source``, runs ``setup.sh`` once when the image is built,
then for each submission puts the student's files in ``/autograder/submission``, runs ``run_autograder``
and reads ``/autograder/results/results.json`` (Gradescope's documentation, "Autograder Specifications").
The bundle holds the package's source (``nanovllm-teach/``), ``setup.sh`` (installs bubblewrap with
apt-get, the CPU build of torch and the package into a virtual environment) and ``run_autograder``: it first
prints ``grade --check-isolation`` (Gradescope shows the teacher that output: the evidence of what its machine
gave the sandbox), then runs ``nanovllm-teach grade EXERCISE /autograder/submission --gradescope
.../results.json``, which grades with what isolates there (bubblewrap where its namespaces are allowed, the
submission's own user id, rlimits, a cgroup where one can be made) and refuses, with a results.json saying
why, when nothing does. The grader writes results.json itself, last, after every process of the submission's
user id is gone, into ``results/``, which that user id cannot write (nor see, inside bubblewrap). Both scripts take
the root from ``AUTOGRADER_ROOT`` (default ``/autograder``) and the Python from ``PYTHON`` (default
``python3``), so that they can be tried in a throwaway folder.
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

# The package's source, as the bundle carries it: what ``pip install`` needs, no caches.
_SOURCE_FILES = ("pyproject.toml", "README.md")


def _source(zip_file: zipfile.ZipFile) -> None:
    for name in _SOURCE_FILES:
        zip_file.write(REPOSITORY / name, f"nanovllm-teach/{name}")
    package = REPOSITORY / "nanovllm_teach"
    for path in sorted(package.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            zip_file.write(path, f"nanovllm-teach/{path.relative_to(REPOSITORY).as_posix()}")


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
        _source(zip_file)
