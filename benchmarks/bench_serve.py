"""The server's cost, and its behaviour under a long load with clients that leave.

    python benchmarks/bench_serve.py --saturation --disconnects

``--saturation``: one workload (``--requests`` prompts of ``--prompt-len`` random tokens, each answered with
exactly ``--output-len`` tokens: greedy, ignore_eos) three ways, alternating ``--repeats`` times: offline
``LLM.generate`` in this process; through the server, not streamed; through the server, streamed (one SSE
chunk per token, every chunk read). All requests are sent at once (saturation). The load generator is a
separate process on the same machine (``--client``: aiohttp, the HTTP client vLLM's own serving benchmark
uses, on asyncio, one connection per request, msgspec for the JSON), so it takes CPU from the server as a
real client on the same host would; the engines run at torch's default threads. Printed: output tokens per
second of each way and the served ways as a fraction of offline (the medians of the repeats), and the
CPU time per output token of each process: the API process (this one: uvicorn's thread, parsing,
detokenizing, SSE), the engine core (its own process) and the load generator.

``--disconnects``: ``--poisson-requests`` requests arriving as a Poisson process (``--rate`` per second), all
streamed; a tenth of the clients (drawn with ``--seed``) close the connection after 1 to 4 chunks. Checked:
every other request completes with usage equal to its prompt and its ``max_tokens``; afterwards 0 KV blocks
are held and ``vllm:num_requests_running`` is 0. Exit status 1 if any check fails.

``--versus-simulator``: for each of ``--sim-rate`` (requests/s; several may be given), ``--sim-requests``
Poisson arrivals of ``--prompt-len`` + 32 tokens, measured through the server (streamed; TTFT to the first
text chunk, TPOT between the first and the last, as the client sees them) and predicted by the simulator for
this machine (``hardware="this-cpu"``: peaks measured now; ``sim_factors=THIS_CPU_SERVED_FACTORS``, the
served calibration, fitted on the engine's steps inside this server) on the same arrivals and lengths: the
medians and the prediction's errors. Both calibrations are refitted by ``python benchmarks/bench_sim.py
--part calibrate --save``. The simulator prices engine steps only, so the engine side of each request is
printed too (stamped by the engine core: from the HTTP request's arrival to the end of the first token's step, the
part of it spent waiting for a step to start, and the TPOT between the steps that made the first and the
last token); the client's TTFT adds HTTP, JSON, tokenizing, the hand-over and the SSE write.

All use one server, ``build_server(live=False)`` (no recording), under uvicorn on 127.0.0.1.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

import msgspec

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
MODEL = "qwen3-tiny"
_DECODE = msgspec.json.Decoder().decode


# ---- the load generator (a separate process) -------------------------------------------------------------

async def _one(http, url: str, body: dict, stream: bool, leave_after: int | None) -> dict:
    if not stream:
        async with http.post(url, json=body) as response:
            data = _DECODE(await response.read())
            return {"status": response.status, "usage": data.get("usage"), "chunks": 0}
    chunks, usage, first, last = 0, None, None, None
    sent = time.perf_counter()
    async with http.post(url, json={**body, "stream": True, "stream_options": {"include_usage": True}}) as response:
        async for line in response.content:  # one line at a time: "data: {...}\n", then the blank line
            if not line.startswith(b"data: {"):
                continue
            chunk = _DECODE(line[6:])
            if chunk.get("usage"):
                usage = chunk["usage"]
            elif chunk.get("choices") and chunk["choices"][0]["text"]:
                chunks += 1
                last = time.perf_counter() - sent
                first = last if first is None else first
                if leave_after is not None and chunks >= leave_after:
                    return {"status": response.status, "usage": None, "chunks": chunks, "left": True}
        return {"status": response.status, "usage": usage, "chunks": chunks, "first_s": first, "last_s": last}


async def _client(spec: dict) -> dict:
    import aiohttp
    url = spec["url"] + "/v1/completions"
    # No limit on connections (one per request in flight) nor on a request's time: the run is bounded outside.
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0),
                                     timeout=aiohttp.ClientTimeout(total=None)) as http:
        start = time.perf_counter()

        async def later(k: int, request: dict) -> dict:
            await asyncio.sleep(max(0.0, start + request["arrival_s"] - time.perf_counter()))
            body = {"model": MODEL, "prompt": request["prompt"], "max_tokens": request["max_tokens"],
                    "temperature": 0, "ignore_eos": True}
            result = await _one(http, url, body, spec["stream"], request.get("leave_after"))
            result["k"] = k
            return result
        results = await asyncio.gather(*(later(k, r) for k, r in enumerate(spec["requests"])))
        return {"wall_s": time.perf_counter() - start, "results": results}


def client_main(spec_path: str) -> None:
    spec = json.loads(Path(spec_path).read_text())
    print(json.dumps(asyncio.run(_client(spec))))


def run_client(url: str, requests: list[dict], stream: bool, tmp: Path) -> dict:
    spec = tmp / "spec.json"
    spec.write_text(json.dumps({"url": url, "requests": requests, "stream": stream}))
    done = subprocess.run([sys.executable, __file__, "--client", str(spec)], capture_output=True, text=True,
                          timeout=3600)
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-3000:])
    return json.loads(done.stdout)


# ---- the server ------------------------------------------------------------------------------------------

def _metric(url: str, name: str) -> float:
    import httpx
    for line in httpx.get(url + "/metrics").text.splitlines():
        if line.startswith(name + "{"):
            return float(line.rsplit(" ", 1)[1])
    raise KeyError(name)


def _children_cpu_s() -> float:
    """CPU seconds (user + system) of the finished child processes (the load generator's runs)."""
    import resource
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _cpu_s(pid: int) -> float:
    """CPU seconds (user + system) a running process has used so far (Linux: ``/proc/PID/stat``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def saturation(args, url: str, tmp: Path, core_pid: int) -> None:
    from nanovllm_teach import LLM, SamplingParams
    prompts = [args.text_ids[k:k + args.prompt_len] for k in range(args.requests)]
    requests = [{"prompt": p, "max_tokens": args.output_len, "arrival_s": 0.0} for p in prompts]
    offline = LLM(max_model_len=args.max_model_len)
    params = SamplingParams(temperature=0.0, max_tokens=args.output_len, ignore_eos=True)
    total = args.requests * args.output_len
    rates = {"offline": [], "served": [], "streamed": []}
    # CPU microseconds per output token: (API process, engine-core process, load generator)
    cpu_us = {"served": [], "streamed": []}
    offline.generate(prompts[:4], params, use_tqdm=False)  # warm

    def timed_generate(name: str) -> None:
        start = time.perf_counter()
        offline.generate(prompts, params, use_tqdm=False)
        rates[name].append(total / (time.perf_counter() - start))
    for repeat in range(args.repeats):
        timed_generate("offline")
        for name, stream in (("served", False), ("streamed", True)):
            api_cpu, core_cpu, client_cpu = time.process_time(), _cpu_s(core_pid), _children_cpu_s()
            out = run_client(url, requests, stream, tmp)
            cpu_us[name].append(((time.process_time() - api_cpu) / total * 1e6,
                                 (_cpu_s(core_pid) - core_cpu) / total * 1e6,
                                 (_children_cpu_s() - client_cpu) / total * 1e6))
            got = sum(r["usage"]["completion_tokens"] for r in out["results"])
            assert got == total, (name, got, total)
            if stream:
                chunks = sum(r["chunks"] for r in out["results"])
                print(f"  streamed: {chunks} content chunks for {total} tokens ({chunks / total:.1%}: a token "
                      f"that completes no character sends none)")
            rates[name].append(total / out["wall_s"])
        print(f"repeat {repeat + 1}: " + ", ".join(f"{k} {v[-1]:.0f} tok/s" for k, v in rates.items()), flush=True)
    offline.close()
    base = statistics.median(rates["offline"])
    print(f"saturation: {args.requests} requests x {args.prompt_len} prompt + {args.output_len} output tokens, "
          f"median of {args.repeats}")
    for name in rates:
        print(f"  {name:12} {statistics.median(rates[name]):7.0f} output tok/s  "
              f"({statistics.median(rates[name]) / base:.1%} of offline)")
    for name, runs in cpu_us.items():
        api, core_us, client = (statistics.median(run[k] for run in runs) for k in range(3))
        print(f"  {name:12} CPU per output token (median): API process {api:.0f} us, engine core {core_us:.0f} us, "
              f"load generator {client:.0f} us (its start-up included)")


def disconnects(args, url: str, app, tmp: Path) -> bool:
    rng = random.Random(args.seed + 1)
    t, requests = 0.0, []
    for _ in range(args.poisson_requests):
        t += rng.expovariate(args.rate)
        start = rng.randrange(len(args.text_ids) - 64)
        requests.append({"prompt": args.text_ids[start:start + rng.randint(8, 64)],
                         "max_tokens": rng.randint(8, 48), "arrival_s": t,
                         "leave_after": rng.randint(1, 4) if rng.random() < 0.1 else None})
    out = run_client(url, requests, True, tmp)
    leavers = [r for r in out["results"] if requests[r["k"]]["leave_after"] is not None]
    stayers = [r for r in out["results"] if requests[r["k"]]["leave_after"] is None]
    wrong = [r["k"] for r in stayers if r["status"] != 200 or r["usage"] != {
        "prompt_tokens": len(requests[r["k"]]["prompt"]), "completion_tokens": requests[r["k"]]["max_tokens"],
        "total_tokens": len(requests[r["k"]]["prompt"]) + requests[r["k"]]["max_tokens"]}]
    deadline = time.monotonic() + 30
    while _metric(url, "vllm:num_requests_running") != 0 and time.monotonic() < deadline:
        time.sleep(0.1)
    held = round(_metric(url, "vllm:kv_cache_usage_perc") * app.state.server.core.ready.num_kvcache_blocks)
    running = _metric(url, "vllm:num_requests_running")
    aborted = _metric(url, "nanovllm:requests_aborted_total")
    print(f"disconnects: {len(requests)} requests, Poisson at {args.rate}/s over {out['wall_s']:.1f} s; "
          f"{len(leavers)} clients left mid-stream ({aborted:.0f} aborted by the server); {len(stayers) - len(wrong)}/"
          f"{len(stayers)} others completed with correct usage; afterwards {held} KV blocks held, "
          f"vllm:num_requests_running {running:.0f}")
    return not wrong and held == 0 and running == 0


def versus_simulator(args, url: str, app, tmp: Path) -> None:
    """For each ``--sim-rate``, the same arrivals and lengths measured through the server (client in its own
    process) and predicted by the simulator on this machine (``hardware="this-cpu"``: its measured peaks and
    the served calibration): TTFT and TPOT medians, and the errors of the prediction."""
    from nanovllm_teach.workload.requests import Fixed, Poisson, make_workload
    for rate in args.sim_rate:
        workload = make_workload(args.sim_requests, Poisson(rate), Fixed(args.prompt_len), Fixed(32),
                                 vocab_size=args.vocab_size, seed=args.seed)
        requests = [{"prompt": args.text_ids[k:k + args.prompt_len], "max_tokens": r.output_len,
                     "arrival_s": r.arrival_s} for k, r in enumerate(workload)]
        # The engine side of each request, stamped by the engine core on the engine's clock and read here, in
        # the API process, as its metrics take it: the wait from the arrival to the start of the step that
        # took it, its TTFT and TPOT.
        metrics, waits, engine_ttfts, engine_tpots = app.state.server.metrics, [], [], []
        first_token, finished = metrics.first_token, metrics.finished
        metrics.first_token = lambda ttft_s, *rest: (engine_ttfts.append(ttft_s), first_token(ttft_s, *rest))

        def on_finished(done):
            waits.append(done.scheduled_s - done.arrival_s)
            if done.num_output_tokens >= 2:
                engine_tpots.append((done.finish_s - done.first_token_s) / (done.num_output_tokens - 1))
            finished(done)
        metrics.finished = on_finished
        try:
            out = run_client(url, requests, True, tmp)
        finally:
            metrics.first_token, metrics.finished = first_token, finished
        engine_ttft = statistics.median(engine_ttfts) * 1e3
        engine_tpot = statistics.median(engine_tpots) * 1e3
        wait = statistics.median(waits) * 1e3
        ttft = statistics.median(r["first_s"] for r in out["results"]) * 1e3
        # TPOT as workload/metrics.py defines it: (last token - first token) / (tokens - 1).
        tpot = statistics.median((r["last_s"] - r["first_s"]) / (r["usage"]["completion_tokens"] - 1)
                                 for r in out["results"]) * 1e3
        sim_ttft, sim_tpot, frontend = _predicted(args, workload)
        engine_sim_ttft = sim_ttft - frontend  # the engine's part of the prediction: without the frontend
        print(f"versus the simulator at {rate}/s ({args.sim_requests} Poisson arrivals, {args.prompt_len} + 32 tokens, "
              f"streamed): client-side TTFT p50 {ttft:.1f} ms, predicted {sim_ttft:.1f} ms "
              f"({sim_ttft / ttft - 1:+.0%}); client-side TPOT p50 {tpot:.2f} ms, predicted {sim_tpot:.2f} ms "
              f"({sim_tpot / tpot - 1:+.0%}); engine-side TTFT p50 (from the HTTP request's arrival to the "
              f"end of the first token's step) {engine_ttft:.1f} ms, predicted {engine_sim_ttft:.1f} ms without the "
              f"frontend's {frontend:.1f} ms ({engine_sim_ttft / engine_ttft - 1:+.0%}), of which waiting for a step "
              f"to start {wait:.2f} ms; engine-side TPOT p50 {engine_tpot:.2f} ms ({sim_tpot / engine_tpot - 1:+.0%})",
              flush=True)


def _predicted(args, workload) -> tuple[float, float, float]:
    """The simulator's TTFT and TPOT medians (ms) on this machine, for the engine as its server runs it (the
    served calibration, whose latency ``frontend_s`` each request meets outside the engine), and that frontend (ms)."""
    from nanovllm_teach import LLM
    from nanovllm_teach.assets import default_model_path
    from nanovllm_teach.sim.efficiency import THIS_CPU_SERVED_FACTORS
    sim = LLM(str(default_model_path()), runner="simulated", hardware="this-cpu", max_model_len=args.max_model_len,
              sim_factors=str(THIS_CPU_SERVED_FACTORS))
    predicted = sim.run_workload(workload, ignore_eos=True)
    sim.close()
    return (statistics.median(t.ttft_s for t in predicted.requests.values()) * 1e3,
            statistics.median(t.tpot_s for t in predicted.requests.values()) * 1e3, sim.server.latency_s * 1e3)


def main() -> int:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n\n")[0])
    parser.add_argument("--client", help=argparse.SUPPRESS)
    parser.add_argument("--saturation", action="store_true")
    parser.add_argument("--disconnects", action="store_true")
    parser.add_argument("--versus-simulator", action="store_true")
    parser.add_argument("--sim-requests", type=int, default=200)
    parser.add_argument("--sim-rate", type=float, nargs="+", default=[4.0, 16.0, 48.0])
    parser.add_argument("--requests", type=int, default=64)
    parser.add_argument("--prompt-len", type=int, default=32)
    parser.add_argument("--output-len", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--poisson-requests", type=int, default=1000)
    parser.add_argument("--rate", type=float, default=20.0)
    parser.add_argument("--max-model-len", type=int, default=512)
    parser.add_argument("--seed", type=int, default=0)

    args = parser.parse_args()
    if args.client:
        client_main(args.client)
        return 0
    import tempfile
    from nanovllm_teach.serve.build import BackgroundServer, build_server
    server = BackgroundServer(build_server(live=False, max_model_len=args.max_model_len))
    url, app = server.url, server.app
    # Prompts cut from English text (the shipped model's own kind of text): its answers are words, so a
    # streamed token is almost always a chunk of text.
    text = ("The engine schedules the waiting requests, allocates their blocks, and runs the model one step at "
            "a time. Each step either prefills new prompts or decodes one token for every running request. ")
    args.text_ids = app.state.server.tokenizer.encode(text * 40, add_special_tokens=False)
    args.vocab_size = app.state.server.core.ready.vocab_size
    ok = True
    try:
        with tempfile.TemporaryDirectory() as tmp:
            if args.saturation:
                saturation(args, url, Path(tmp), app.state.server.core.ready.pid)
            if args.versus_simulator:
                versus_simulator(args, url, app, Path(tmp))
            if args.disconnects:
                ok = disconnects(args, url, app, Path(tmp))
    finally:
        server.stop()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
