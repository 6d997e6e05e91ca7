"""``nanovllm-teach plan`` on a real two-node Ray cluster in this machine, against the same plan run serially.

Starts a head node (``ray start --head``) and a second node (``ray start --address=...``), one CPU each, in a
temporary folder of their own; plans a small space on the cluster (``--address``) and in this process
(``--serial``); prints both wall times and whether the two JSON answers are the same bytes; stops the cluster
whatever happens, a failure to start included. The cluster lives in a temporary folder of its own
(``--temp-dir``), and is stopped as ``ray stop`` stops one, but only its own processes: those whose command line
names that folder, by their ids (``ray stop`` itself would stop every Ray on the machine, others' too). Ray's
raylet gives its helper processes 15 s to start, which a machine loaded far beyond its cores can miss: the
start-up's output is printed then.

Usage: ``python benchmarks/bench_plan_ray.py``.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from nanovllm_teach.cli import main

RAY = str(Path(sys.executable).with_name("ray"))
PLAN = ["plan", "--model", "qwen3-0.6b", "--rate", "50", "--ttft-ms", "200", "--tpot-ms", "20",
        "--prompt-lens", "uniform:16:64", "--output-lens", "uniform:4:16", "--max-model-len", "2048",
        "--gpus", "l4,rtx-4090", "--price", "l4=0.7", "--tp", "1", "--max-num-seqs", "32,64",
        "--max-num-batched-tokens", "2048", "--replicas", "1,2", "--resolution", "0.2"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _ray(*args: str, temp_dir: Path) -> subprocess.CompletedProcess:
    done = subprocess.run([RAY, *args], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "RAY_TMPDIR": str(temp_dir)})
    print(f"$ ray {' '.join(args)}  -> exit {done.returncode}")
    if done.returncode != 0:
        print((done.stdout + done.stderr)[-2000:])
    return done


def _plan(extra: list[str], out: Path) -> tuple[float, bytes]:
    wall = time.perf_counter()
    status = main([*PLAN, *extra, "--out", str(out / "plan.json"), "--log", str(out / "log.jsonl")])
    wall = time.perf_counter() - wall
    return wall, (out / "plan.json").read_bytes() if status == 0 else b""


def run() -> int:
    # ``ray start --head`` runs the cluster with token authentication (Ray 2.5x+): the second node and this
    # process, its driver, must present the token too (Ray keeps it in ~/.ray/auth_token).
    os.environ["RAY_AUTH_MODE"] = "token"
    work = Path(tempfile.mkdtemp(prefix="bench_plan_ray_"))
    temp_dir = work / "ray"
    port = _free_port()
    address = f"127.0.0.1:{port}"
    try:
        head = _ray("start", "--head", "--num-cpus=1", f"--port={port}", "--include-dashboard=false",
                    f"--temp-dir={temp_dir}", temp_dir=temp_dir)
        worker = head.returncode == 0 and _ray("start", f"--address={address}", "--num-cpus=1", temp_dir=temp_dir)
        if head.returncode != 0 or worker.returncode != 0:
            print("the cluster did not start: nothing planned")
            return 1
        (work / "ray_run").mkdir()
        (work / "serial_run").mkdir()
        ray_s, on_ray = _plan(["--address", address], work / "ray_run")
        serial_s, serial = _plan(["--serial"], work / "serial_run")
        print(f"two nodes, one CPU each: {ray_s:.0f} s; serial, in this process: {serial_s:.0f} s")
        print(f"answers the same bytes: {bool(on_ray) and on_ray == serial} ({len(serial)} bytes of JSON)")
        print(f"load average at the end {'/'.join(f'{x:.1f}' for x in os.getloadavg())}")
        return 0 if on_ray == serial and serial else 1
    finally:
        _stop(temp_dir)


def _stop(temp_dir: Path) -> None:
    """``ray stop``'s SIGTERM, then SIGKILL for what is left, sent only to the processes of this cluster."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        pids = _cluster_pids(temp_dir)
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        if pids:
            time.sleep(3)
    print(f"stopped the cluster's processes; left: {len(_cluster_pids(temp_dir))}")


def _cluster_pids(temp_dir: Path) -> list[int]:
    mine = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit() and int(proc.name) != os.getpid():
            try:
                if str(temp_dir).encode() in (proc / "cmdline").read_bytes():
                    mine.append(int(proc.name))
            except OSError:
                pass
    return mine


if __name__ == "__main__":
    sys.exit(run())
