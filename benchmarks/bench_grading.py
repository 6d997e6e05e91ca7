"""Grading speed: a class of ``decode_slot`` (or ``tp_slice``) submissions, and one learner's self-check.

    python benchmarks/bench_grading.py [--students 30] [--jobs 2] [--exercise decode_slot|tp_slice]

1. A class of ``--students`` submissions (right and wrong ones in turn) graded by ``nanovllm-teach grade
   EXERCISE CLASS --jobs N`` in a fresh interpreter: wall seconds and CPU seconds (the command and
   everything it started), against the target of 3 minutes on 2 cores.
2. One self-check, ``nanovllm-teach grade EXERCISE mine.py``, in a fresh interpreter: CPU seconds (the
   command and everything it started: torch's import, the reference runs, the sandbox, the graded runs),
   against the target of 5 s.

CPU seconds are what this process's children used (``resource.RUSAGE_CHILDREN``), which a busy machine
does not inflate the way it inflates wall time. Whether each grade ran in bubblewrap is printed.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RIGHT = """def decode_slot(seq, block_size):
    position = seq.num_tokens - 1
    return seq.block_table[position // block_size] * block_size + position % block_size
"""
WRONG = """def decode_slot(seq, block_size):
    return seq.block_table[-1] * block_size + seq.num_tokens % block_size
"""
TP_RIGHT = """def rank_slice(kind, shape, parts, part, tp_size, tp_rank):
    if kind == "column":
        rows = parts[part] // tp_size
        return 0, tp_rank * rows, rows, sum(parts[:part]) // tp_size
    if len(shape) == 2:
        return 1, tp_rank * (shape[1] // tp_size), shape[1] // tp_size, 0
    return (0, 0, shape[0], 0) if tp_rank == 0 else None
"""
TP_WRONG = TP_RIGHT.replace("return 1, tp_rank * (shape[1] // tp_size)", "return 1, 0")  # forgets the rank
SUBMISSIONS = {"decode_slot": (RIGHT, WRONG), "tp_slice": (TP_RIGHT, TP_WRONG)}
CLASS_TARGET_S = 180.0
SELF_CHECK_TARGET_CPU_S = 5.0


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _run(argv: list[str]) -> tuple[float, float, str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
           "HF_HUB_OFFLINE": "1"}
    cpu, started = _children_cpu(), time.monotonic()
    done = subprocess.run([sys.executable, "-m", "nanovllm_teach.cli", *argv], env=env, capture_output=True,
                          text=True)
    return time.monotonic() - started, _children_cpu() - cpu, done.stdout


def main() -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    parser.add_argument("--students", type=int, default=30)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--exercise", choices=sorted(SUBMISSIONS), default="decode_slot")
    args = parser.parse_args()
    right, wrong = SUBMISSIONS[args.exercise]
    from nanovllm_teach.exercises import isolation

    print(f"bubblewrap: {'yes' if isolation.available() else 'NO (plain processes)'}; a user id per submission: "
          f"{'yes' if isolation.uid_drop() else 'no'}; load: {os.getloadavg()}")
    with tempfile.TemporaryDirectory() as tmp:
        room = Path(tmp) / "class"
        room.mkdir()
        for k in range(args.students):
            (room / f"student_{k:02d}.py").write_text(right if k % 2 == 0 else wrong)
        wall, cpu, out = _run(["grade", args.exercise, str(room), "--jobs", str(args.jobs)])
        print(out.strip().splitlines()[-1])
        print(f"class of {args.students}, --jobs {args.jobs}: {wall:.1f} s wall ({wall / CLASS_TARGET_S:.2f} of the "
              f"3-minute target), {cpu:.1f} s CPU ({cpu / args.students:.2f} s per submission)")
        mine = Path(tmp) / "mine.py"
        mine.write_text(right)
        wall, cpu, out = _run(["grade", args.exercise, str(mine)])
        print(out.strip().splitlines()[-1][:60])
        print(f"one self-check: {cpu:.2f} s CPU ({cpu / SELF_CHECK_TARGET_CPU_S:.2f} of the 5 s target), "
              f"{wall:.1f} s wall")


if __name__ == "__main__":
    main()
