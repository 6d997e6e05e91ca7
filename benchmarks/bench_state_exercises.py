"""What the sandbox costs the exercises whose function acts on the scheduler's or block manager's state.

    python benchmarks/bench_state_exercises.py --against OTHER_CHECKOUT [--rounds 2]

For each such exercise, one self-check of its reference solution (``nanovllm-teach grade NAME
solution.py``, a fresh interpreter: torch's import, the reference runs, the graded runs) in this checkout
(the function in the bubblewrap worker, its state sent as a snapshot each call) and in ``OTHER_CHECKOUT``
(e.g. the commit before, where the function ran beside the engine), alternating, ``--rounds`` times each.
Printed: CPU seconds (the command and everything it started, ``resource.RUSAGE_CHILDREN``, which a busy
machine does not inflate as it does wall time), wall seconds, and the CPU ratio this / other.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
EXERCISES = ("schedule_prefill", "schedule_decode", "postprocess", "can_allocate", "can_append", "allocate")


def self_check(checkout: Path, exercise: str) -> tuple[float, float, str]:
    """CPU seconds, wall seconds and the verdict's first word of one self-check in ``checkout``."""
    env = {**os.environ, "PYTHONPATH": str(checkout), "HF_HUB_OFFLINE": "1"}
    solution = checkout / "nanovllm_teach" / "exercises" / exercise / "solution.py"
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "nanovllm_teach.cli", "grade", exercise, str(solution)], env=env,
                          capture_output=True, text=True, timeout=600)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return cpu, wall, (done.stdout.split() or ["?"])[0]


def main() -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    parser.add_argument("--against", type=Path, required=True, help="another checkout to compare with")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    print(f"{'exercise':18} {'cpu here':>9} {'cpu other':>9} {'ratio':>6} {'wall here':>9} {'wall other':>10}")
    for exercise in EXERCISES:
        here, other = [], []
        for _ in range(args.rounds):
            here.append(self_check(REPO, exercise))
            other.append(self_check(args.against.resolve(), exercise))
        verdicts = {v for _, _, v in here + other}
        cpu_here, cpu_other = (min(c for c, _, _ in runs) for runs in (here, other))
        wall_here, wall_other = (min(w for _, w, _ in runs) for runs in (here, other))
        print(f"{exercise:18} {cpu_here:9.2f} {cpu_other:9.2f} {cpu_here / cpu_other:6.2f} {wall_here:9.2f} "
              f"{wall_other:10.2f}  {'/'.join(sorted(verdicts))}")


if __name__ == "__main__":
    main()
