"""The server's memory under a long run: does its RSS stop growing?

    python benchmarks/bench_serve_soak.py                      # 10,000 requests, the live page on
    python benchmarks/bench_serve_soak.py --no-live --requests 2000

Starts the real server (``nanovllm-teach serve``, the shipped model, its defaults as a user gets them: the
live page on unless ``--no-live``) in its own process, and sends it ``--requests`` short requests
(``--concurrency`` at a time, aiohttp, from this process): prompts of random words, ``--max-tokens`` tokens
each, every fourth one streamed, every tenth with ``n=2``, every fiftieth a client that leaves after its first
chunk. The RSS (``/proc/PID/status``, VmRSS) of each of the server's two processes, the API process and its
engine core, is read after the first ``--warmup`` requests and at the end, and every ``--every`` requests in
between. Printed: those readings and the growth of each and of both together from the warm-up to the end,
against the target (both together at most 100 MB); exit status 1 if a request failed or the target is missed.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODEL = "qwen3-tiny"
TARGET_MB = 100.0
WORDS = ("the", "a", "server", "memory", "token", "block", "cache", "river", "story", "green", "seven", "quiet",
         "engine", "batch", "step", "prefix", "answer", "learn", "small", "model", "time", "long", "bounded")


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for process {pid}")


def children(pid: int) -> list[int]:
    """The processes ``pid`` started (Linux): the server's engine core."""
    return [int(child) for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def start_server(port: int, live: bool) -> subprocess.Popen:
    command = [sys.executable, "-m", "nanovllm_teach.cli", "serve", "--port", str(port), "--max-model-len", "512"]
    if not live:
        command.append("--no-live")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    return subprocess.Popen(command, env=env, cwd=ROOT, stdout=subprocess.DEVNULL)


async def wait_healthy(http, url: str, server: subprocess.Popen, timeout_s: float = 300.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"the server exited with status {server.returncode} before it answered")
        try:
            async with http.get(url + "/health") as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        await asyncio.sleep(0.5)
    raise RuntimeError(f"the server did not answer /health within {timeout_s} s")


async def one_request(http, url: str, k: int, rng: random.Random, max_tokens: int) -> bool:
    body = {"model": MODEL, "prompt": " ".join(rng.choices(WORDS, k=rng.randint(4, 40))), "max_tokens": max_tokens,
            "temperature": 0.8, "ignore_eos": True, "n": 2 if k % 10 == 0 else 1}
    stream = k % 4 == 0
    leaves = k % 50 == 0
    if stream or leaves:
        body["stream"] = True
        async with http.post(url + "/v1/completions", json=body) as response:
            if response.status != 200:
                return False
            async for _ in response.content:
                if leaves:
                    return True  # leaving the block closes the connection mid-stream
            return True
    async with http.post(url + "/v1/completions", json=body) as response:
        await response.read()
        return response.status == 200


async def soak(args: argparse.Namespace) -> int:
    import aiohttp

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    server = start_server(port, not args.no_live)
    failures, readings = 0, []
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=120),
                                         connector=aiohttp.TCPConnector(limit=args.concurrency)) as http:
            await wait_healthy(http, url, server)
            (core_pid,) = children(server.pid)
            rng = random.Random(args.seed)
            semaphore = asyncio.Semaphore(args.concurrency)
            done = 0
            start = time.monotonic()

            async def run(k: int) -> None:
                nonlocal failures, done
                async with semaphore:
                    try:
                        ok = await one_request(http, url, k, rng, args.max_tokens)
                    except (aiohttp.ClientError, asyncio.TimeoutError):
                        ok = False
                    failures += not ok
                    done += 1
                    if done == args.warmup or done % args.every == 0 or done == args.requests:
                        api, core = rss_mb(server.pid), rss_mb(core_pid)
                        readings.append((done, api, core))
                        print(f"after {done:>6} requests ({time.monotonic() - start:6.0f} s): RSS API process "
                              f"{api:7.1f} MB, engine core {core:7.1f} MB", flush=True)

            await asyncio.gather(*(run(k) for k in range(args.requests)))
    finally:
        server.terminate()
        server.wait(60)
    warm = next(r for r in readings if r[0] >= args.warmup)
    end = readings[-1]
    for k, name in ((1, "API process"), (2, "engine core")):
        print(f"{name}: RSS after the first {args.warmup} requests {warm[k]:.1f} MB, after {args.requests} "
              f"{end[k]:.1f} MB: growth {end[k] - warm[k]:+.1f} MB")
    growth = end[1] + end[2] - warm[1] - warm[2]
    met = growth <= TARGET_MB and failures == 0
    print(f"both: growth {growth:+.1f} MB (target <= {TARGET_MB:.0f} MB: "
          f"{'met' if growth <= TARGET_MB else 'NOT met'}); {failures} failed requests; "
          f"live page {'off' if args.no_live else 'on'}")
    return 0 if met else 1


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    ap.add_argument("--requests", type=int, default=10_000)
    ap.add_argument("--warmup", type=int, default=1_000)
    ap.add_argument("--every", type=int, default=1_000, help="read the RSS every this many requests")
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--max-tokens", type=int, default=8)
    ap.add_argument("--no-live", action="store_true", help="serve without the live page (--no-live)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    if not 0 < args.warmup < args.requests:
        ap.error(f"--warmup must be between 1 and --requests - 1, got {args.warmup}")
    return asyncio.run(soak(args))


if __name__ == "__main__":
    sys.exit(main())
