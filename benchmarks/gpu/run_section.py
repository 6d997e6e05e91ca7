"""Run one GPU-check section in this process: ``python benchmarks/gpu/run_section.py NAME MODE WORK OUT DEADLINE``
(``DEADLINE``: the ``time.time()`` at which the parent stops it).

``benchmarks/gpu_check.py`` starts one such process per section, so a crash or a device fault in one
section cannot touch the next. The section's verdict is the last line printed; an exception is a FAIL.
"""

from __future__ import annotations

import os
import sys
import traceback
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing may reach the network
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
sys.path.insert(0, str(Path(__file__).resolve().parent))  # the section modules beside this file

SECTIONS = {
    "checkpoint": "sec_engine", "kernels": "sec_kernels", "greedy": "sec_engine", "graphs": "sec_engine",
    "memory": "sec_memory", "tp": "sec_engine", "flash": "sec_engine", "throughput": "sec_throughput",
}


def main(argv: list[str]) -> int:
    name, mode, work, out, deadline = argv
    import importlib

    from common import Setup, describe_machine, verdict
    setup = Setup(mode, Path(work), Path(out), float(deadline))
    print(describe_machine(), flush=True)
    try:
        module = importlib.import_module(SECTIONS[name])
        line = getattr(module, f"run_{name}")(setup)
    except SystemExit as exc:  # a section that cannot start says why in its message
        line = str(exc.code)
    except BaseException as exc:  # everything is a verdict here: the parent reads the last line
        traceback.print_exc(file=sys.stdout)
        line = verdict("FAIL", f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
    print(line, flush=True)
    return 0 if line.startswith("VERDICT: PASS") or line.startswith("VERDICT: SKIP") else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
