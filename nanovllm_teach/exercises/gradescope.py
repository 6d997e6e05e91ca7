"""Gradescope's autograder bundle for one exercise: a class graded on Gradescope's machines.

Role: grading (the teacher's side). Emits no events.

The layout is Gradescope's ("Autograder Specifications"): ``setup.sh`` runs once as the image is built,
``run_autograder`` once per submission. Both are shell files shipped beside this module (``gradescope_scripts/``);
the bundle writes in only the exercise's name. ``run_autograder`` prints ``grade --check-isolation`` first, as the
teacher's evidence of what that machine gave the sandbox. Both scripts take the root from ``AUTOGRADER_ROOT``
and the Python from ``PYTHON``, so that they can be tried in a throwaway folder.
"""

from __future__ import annotations

import shlex
import zipfile
from pathlib import Path

from nanovllm_teach.i18n import Text, say

REPOSITORY = Path(__file__).resolve().parents[2]
SCRIPTS = Path(__file__).resolve().parent / "gradescope_scripts"
EXERCISE_PLACEHOLDER = "@EXERCISE@"  # in run_autograder

NEEDS_A_CHECKOUT = Text(en="a Gradescope bundle is made from a source checkout of nanovllm-teach (git clone, then "
                           "pip install -e .): {folder} has no pyproject.toml",
                        zh="Gradescope 包要从 nanovllm-teach 的源码检出制作（git clone 之后 pip install -e .）：{folder} "
                           "里没有 pyproject.toml")


def _script(zip_file: zipfile.ZipFile, name: str, text: str) -> None:
    info = zipfile.ZipInfo(name)
    info.external_attr = 0o755 << 16  # executable, as Gradescope runs it
    info.compress_type = zipfile.ZIP_DEFLATED
    zip_file.writestr(info, text)


def write_bundle(exercise: str, path: Path) -> None:
    """The autograder bundle grading ``exercise``, written to ``path`` (a .zip); ValueError where this package is
    installed without its source (the bundle installs from it)."""
    if not (REPOSITORY / "pyproject.toml").is_file():
        raise ValueError(say(NEEDS_A_CHECKOUT, folder=REPOSITORY))
    run = (SCRIPTS / "run_autograder").read_text(encoding="utf-8")
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zip_file:
        _script(zip_file, "setup.sh", (SCRIPTS / "setup.sh").read_text(encoding="utf-8"))
        _script(zip_file, "run_autograder", run.replace(EXERCISE_PLACEHOLDER, shlex.quote(exercise)))
        # The package's source, as ``pip install`` needs it: no caches.
        for name in ("pyproject.toml", "README.md"):
            zip_file.write(REPOSITORY / name, f"nanovllm-teach/{name}")
        for source in sorted((REPOSITORY / "nanovllm_teach").rglob("*")):
            if source.is_file() and "__pycache__" not in source.parts:
                zip_file.write(source, f"nanovllm-teach/{source.relative_to(REPOSITORY).as_posix()}")
