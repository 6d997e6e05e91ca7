"""Fetch wheels of what the GPU image lacks into ``benchmarks/gpu/wheels/`` (run where PyPI is reachable).

The lent GPU machine has Python 3.12, torch, triton, transformers, safetensors, xxhash, tqdm and
matplotlib, but not msgspec or structlog, and it cannot download anything. This fetches, for CPython 3.12
on x86-64 Linux (manylinux), the versions installed here, and the same for this interpreter so that
``benchmarks/gpu_check.py --cpu-dry-run`` installs from the very same folder. The folder is ignored by
git (``benchmarks/gpu/.gitignore``); the device tool brings it along when named in ``carry``.

    python benchmarks/gpu/prepare_wheels.py
"""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

WHEELS = Path(__file__).resolve().parent / "wheels"
PACKAGES = ("msgspec", "structlog")
GPU_PYTHON = "3.12"
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64")


def main() -> int:
    WHEELS.mkdir(exist_ok=True)
    pins = [f"{name}=={version(name)}" for name in PACKAGES]
    here = f"{sys.version_info.major}.{sys.version_info.minor}"
    for python in dict.fromkeys([GPU_PYTHON, here]):
        cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
               "--python-version", python, "--implementation", "cp",
               *(arg for p in PLATFORMS for arg in ("--platform", p)), "--dest", str(WHEELS), *pins]
        print("$", " ".join(cmd), flush=True)
        subprocess.run(cmd, check=True)
    wheels = sorted(WHEELS.glob("*.whl"))
    print("\n".join(f"{w.stat().st_size:>9,} {w.name}" for w in wheels))
    print(f"{sum(w.stat().st_size for w in wheels):,} bytes in {WHEELS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
