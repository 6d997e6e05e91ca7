"""Importing the package, or its parts that need no torch, changes nothing in the environment and loads only
what was asked for: the package root defers everything (``__getattr__``), and the OpenMP wait policy is asked
for by the engine's ``config.py``, not by the import (``tests/test_threads.py`` shows it is still set when an
engine is built)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

MOST_SCHEDULER_MODULES = 10  # the scheduler and block manager are plain Python: their own few modules


def _imported(modules: str) -> dict:
    """What importing ``modules`` (comma-separated) in a fresh interpreter did: the project's modules it loaded,
    whether torch was among them, and whether the environment is the one it started with."""
    code = (f"import json, os, sys; before = dict(os.environ); import {modules}; "
            "print(json.dumps({'modules': sorted(m for m in sys.modules if m.startswith('nanovllm_teach')), "
            "'torch': 'torch' in sys.modules, 'same_environment': dict(os.environ) == before}))")
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_importing_the_package_and_its_torch_free_parts_changes_no_environment_variable():
    done = _imported("nanovllm_teach, nanovllm_teach.engine.scheduler, nanovllm_teach.trace, nanovllm_teach.viz")
    assert done["same_environment"] and not done["torch"]


def test_the_scheduler_loads_a_handful_of_modules():
    done = _imported("nanovllm_teach.engine.scheduler")
    assert len(done["modules"]) <= MOST_SCHEDULER_MODULES, done["modules"]
    assert "nanovllm_teach.utils.threads" not in done["modules"] and "nanovllm_teach.assets" not in done["modules"]
