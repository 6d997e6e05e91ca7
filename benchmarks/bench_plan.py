"""How long ``nanovllm-teach plan`` takes for a space of 100 configurations or more: Llama-3.1-8B, ShareGPT's
lengths, p99 TTFT <= 1 s and p99 TPOT <= 50 ms at 20 requests/s, every priced GPU at TP 1/2/4 with two batch
limits each and replicas 1/2/4.

``--ray-address ADDR`` plans on a running cluster, ``--serial`` in this process, the default on a local Ray
started in this process. ``--gpus`` and ``--tp`` narrow the space (a shorter run measures the time per probe).
Prints the space's size (candidates searched, configurations ranked), the probes run, the
wall time and the seconds per probe, and the load average, which on a shared machine decides the rest.

Usage: ``python benchmarks/bench_plan.py [--serial | --ray-address ADDR] [--gpus LIST] [--tp LIST] [--out DIR]``.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

from nanovllm_teach.cli import main

SPACE = ["--model", "llama-3.1-8b", "--rate", "20", "--ttft-ms", "1000", "--tpot-ms", "50",
         "--gpus", "h100-sxm,h200,a100-80gb,a100-40gb,rtx-4090", "--tp", "1,2,4", "--max-num-seqs", "128,256",
         "--max-num-batched-tokens", "8192,16384", "--replicas", "1,2,4"]


def main_bench() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    parser.add_argument("--serial", action="store_true")
    parser.add_argument("--ray-address", default=None)
    parser.add_argument("--gpus", default=None, help="instead of the space's five GPUs")
    parser.add_argument("--tp", default=None, help="instead of the space's 1,2,4")
    parser.add_argument("--out", default=None, help="where the plan's JSON, log and picture go (a temporary folder)")
    args = parser.parse_args()
    out = Path(args.out or tempfile.mkdtemp(prefix="bench_plan_"))
    space = list(SPACE)
    for option in ("gpus", "tp"):
        if getattr(args, option) is not None:
            space[space.index(f"--{option}") + 1] = getattr(args, option)
    argv = ["plan", *space, "--out", str(out / "plan.json"), "--picture", str(out / "plan.png")]
    argv += ["--serial"] if args.serial else (["--address", args.ray_address] if args.ray_address else [])
    wall = time.perf_counter()
    status = main(argv)
    wall = time.perf_counter() - wall
    rows = json.loads((out / "plan.json").read_text())["rows"] if status == 0 else []
    probes = sum(1 for line in (out / "plan-log.jsonl").open()) - 1 if (out / "plan-log.jsonl").exists() else 0
    searched = len({(r["hardware"], r["tensor_parallel_size"], r["max_num_seqs"], r["max_num_batched_tokens"])
                    for r in rows})
    print(f"exit {status}; {searched} candidates sustained a rate, {len(rows)} configurations ranked; {probes} probes "
          f"in {wall:.0f} s ({wall / max(probes, 1):.2f} s per probe, wall); load average at the end "
          f"{'/'.join(f'{x:.1f}' for x in os.getloadavg())}; outputs in {out}")


if __name__ == "__main__":
    main_bench()
