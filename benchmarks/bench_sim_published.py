"""The simulator against published serving measurements of real engines (``nanovllm_teach/sim/published.json``).

Every case runs through the public path (``simulate_case``: ``LLM(model, runner="simulated", hardware=...)``
and ``serve_workload`` with the case's clients, lengths and ``ignore_eos``) on its GPU's own efficiency
factors (``Efficiency.for_device``); ``tests/test_sim_published.py`` runs the quicker judged cases the same way. Printed per case: fitted or judged, each measured figure beside the simulated
one and the error; figures the source does not let us reproduce are printed and marked "not judged".

``--fit``: for each GPU with fitted cases, the memory efficiency that makes its fitted one-GPU cases match on
average (their first judged figure), then the collective's fixed cost for its fitted tensor-parallel cases
(bisection), then its FP8 factors on its fitted FP8 cases (``fit``), then the API server's work per request and per prompt token on every fitted case that gives a
TTFT (``fit_server``), printed for ``DEVICE_EFFICIENCY`` and ``GPU_API_SERVER`` in
``nanovllm_teach/sim/efficiency.py``. ``--record``: write
each judged case's errors into ``published.json`` as ``recorded_error`` (what ``tests/test_sim_published.py``
holds it to).

Last, a line per kind of weights (16-bit, FP8) sums up the judged cases: their largest errors and how many
figures miss the goal.

Usage: ``python benchmarks/bench_sim_published.py [--fit] [--record]``.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from nanovllm_teach import LLM
from nanovllm_teach.sim.cost_model import load_shape
from nanovllm_teach.sim.efficiency import Efficiency
from nanovllm_teach.sim.published import CASES_FILE, Case, case_errors, dump_cases, load_cases
from nanovllm_teach.workload.arrivals import serve_workload
from nanovllm_teach.workload.metrics import percentile
from nanovllm_teach.workload.requests import (AtOnce, Fixed, Poisson, Request, make_workload, sharegpt_output_lengths,
                                              sharegpt_prompt_lengths)


# What a fit may move, and where it searches: one GPU's memory efficiency (a decode reads every weight, so
# one-GPU cases depend on it most) and, from cases on several GPUs of that model, a collective's fixed cost.
FIT_RANGES = {"memory": (0.3, 1.0), "allreduce_latency_s": (0.0, 200e-6), "frontend_request_s": (0.0, 20e-3),
              "fp8_layer_s": (0.0, 100e-6), "fp8_matmul": (0.1, 1.0)}
# The API server's work per prompt token is searched on this grid: what tokenizing a prompt costs, up to 10 us a token.
SERVER_TOKEN_GRID = (0.0, 2.5e-6, 5e-6, 1e-5)


def simulate_case(case: Case, sim_factors: str | Path | None = None, seed: int = 0) -> dict[str, float]:
    """The case's figures from the simulated engine on its GPU, with the factors in ``sim_factors`` (a JSON
    file, as ``simulate --factors`` takes) or, by default, that GPU's own (``Efficiency.for_device``)."""
    shape = load_shape(case.model)
    w = case.workload
    rng = random.Random(seed)
    if isinstance(w.prompt, tuple) and isinstance(w.output, tuple):  # the source's own lengths, in its order
        workload = [Request(0.0, [rng.randrange(shape.vocab_size) for _ in range(p)], o)
                    for p, o in zip(w.prompt, w.output)]
    else:
        prompts = sharegpt_prompt_lengths() if w.prompt == "sharegpt" else Fixed(w.prompt)
        outputs = sharegpt_output_lengths() if w.output == "sharegpt" else Fixed(w.output)
        arrivals = AtOnce() if w.rate is None else Poisson(w.rate)
        workload = make_workload(w.num_requests, arrivals, prompts, outputs, vocab_size=shape.vocab_size, seed=seed)
    llm = LLM(case.model, runner="simulated", hardware=case.hardware, sim_factors=sim_factors,
              quantization=case.quantization, **case.engine_settings)
    result = serve_workload(llm, workload, ignore_eos=w.ignore_eos, answers=llm.answers, concurrency=w.concurrency,
                            admit_every=w.admit_every, server=llm.server)
    llm.close()
    tpot = [r.tpot_s for r in result.requests.values() if r.tpot_s is not None]
    ttft = [r.ttft_s for r in result.requests.values() if r.ttft_s is not None]
    tpot_ms = statistics.median(tpot) * 1e3
    return {"tpot_p50_ms": tpot_ms, "ttft_p50_ms": percentile(ttft, 0.5) * 1e3,
            "output_tok_s": result.output_tokens_per_s, "decode_tok_s": 1e3 / tpot_ms}


def _slowness(case, simulated: dict[str, float]) -> float:
    """How much slower than measured the simulated engine ran on the case's first judged figure (> 0: slower)."""
    name = case.judged[0]
    error = case_errors(case, simulated)[name]
    return -error if name.endswith("_tok_s") else error


def _bisect(name: str, group: list, factors: dict[str, float], iterations: int) -> float:
    """The value of the factor ``name`` (the others as in ``factors``) at which ``group``'s mean slowness is 0,
    by bisection in ``FIT_RANGES[name]``, rounded to 3 digits."""
    lo, hi = FIT_RANGES[name]
    trial = dict(factors)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "factors.json"
        for _ in range(iterations):
            trial[name] = (lo + hi) / 2
            path.write_text(json.dumps(trial))
            slow = sum(_slowness(c, simulate_case(c, path)) for c in group) / len(group)
            # slower than measured: a larger share (of bandwidth or peak), or a cheaper fixed cost
            share = name not in ("allreduce_latency_s", "fp8_layer_s")
            lo, hi = ((trial[name], hi) if share else (lo, trial[name])) if slow > 0 else (
                (lo, trial[name]) if share else (trial[name], hi))
    return float(f"{(lo + hi) / 2:.3g}")


def fit(cases: list, iterations: int = 10) -> dict[str, dict[str, float]]:
    """Per GPU: ``memory`` on its fitted one-GPU 16-bit cases, then ``allreduce_latency_s`` on its fitted
    tensor-parallel ones, then, on its fitted FP8 cases, ``fp8_layer_s`` on those whose first judged figure is a
    TPOT (a decode, where the quantizing kernels weigh) and ``fp8_matmul`` on those whose first is a TTFT (a
    prefill, where the FP8 GEMMs do), each by bisection on their mean slowness. Before the all-reduce's one
    value, the value each tensor-parallel case asks for alone is printed beside its number of GPUs: whether
    the collective's fixed cost grows with them is for those to say."""
    fitted: dict[str, dict[str, float]] = {}
    for hardware in sorted({c.hardware for c in cases if c.role == "fitted"}):
        factors = Efficiency.for_device(hardware).to_dict()
        mine = [c for c in cases if c.role == "fitted" and c.hardware == hardware]
        sixteen_bit = [c for c in mine if c.quantization is None]
        fp8 = [c for c in mine if c.quantization == "fp8"]
        plan = [("memory", [c for c in sixteen_bit if c.engine_settings.get("tensor_parallel_size", 1) == 1]),
                ("allreduce_latency_s", [c for c in sixteen_bit if c.engine_settings.get("tensor_parallel_size", 1) > 1]),
                ("fp8_layer_s", [c for c in fp8 if c.judged[0] == "tpot_p50_ms"]),
                ("fp8_matmul", [c for c in fp8 if c.judged[0] == "ttft_p50_ms"])]
        for name, group in plan:
            if not group:
                continue
            if name == "allreduce_latency_s":
                for case in sorted(group, key=lambda c: c.engine_settings["tensor_parallel_size"]):
                    alone = _bisect(name, [case], factors, iterations)
                    print(f"  {case.id} alone ({case.engine_settings['tensor_parallel_size']} GPUs, "
                          f"{case.engine}): {name} {alone}")
            factors[name] = _bisect(name, group, factors, iterations)
            fitted.setdefault(hardware, {})[name] = factors[name]
            print(f"fitted {hardware}: {name} {factors[name]} on {', '.join(c.id for c in group)}")
    fit_server(cases, fitted)
    return fitted


def fit_server(cases: list, fitted: dict[str, dict[str, float]], iterations: int = 8) -> dict[str, float]:
    """The API server's work per request and per prompt token (``frontend_request_s``, ``frontend_token_s``:
    ``GPU_API_SERVER``, one pair for every GPU, the host's work), on the fitted cases that give a TTFT, each
    with its GPU's other factors as ``fitted`` leaves them: for each per-token cost of
    ``SERVER_TOKEN_GRID``, the per-request cost whose mean signed TTFT error is 0 (bisection), and of those the
    pair with the least mean absolute TTFT error. FP8 cases are left out: their TTFT fits ``fp8_matmul``."""
    group = [c for c in cases if c.role == "fitted" and "ttft_p50_ms" in c.judged and c.quantization is None]
    if not group:
        return {}
    best: tuple[float, float, float] | None = None  # (mean absolute error, per request, per token)
    with tempfile.TemporaryDirectory() as folder:
        def ttft_errors(request_s: float, token_s: float) -> list[float]:
            errors = []
            for case in group:
                path = Path(folder) / f"{case.hardware}.json"
                factors = Efficiency.for_device(case.hardware).to_dict() | fitted.get(case.hardware, {})
                path.write_text(json.dumps(factors | {"frontend_request_s": request_s, "frontend_token_s": token_s}))
                errors.append(case_errors(case, simulate_case(case, path))["ttft_p50_ms"])
            return errors

        for token_s in SERVER_TOKEN_GRID:
            lo, hi = FIT_RANGES["frontend_request_s"]
            for _ in range(iterations):  # first tokens come later as the server's work grows
                lo, hi = (lo, (lo + hi) / 2) if statistics.mean(ttft_errors((lo + hi) / 2, token_s)) > 0 else (
                    (lo + hi) / 2, hi)
            request_s = float(f"{(lo + hi) / 2:.3g}")
            error = statistics.mean(abs(e) for e in ttft_errors(request_s, token_s))
            print(f"  server: {request_s * 1e3:.3g} ms a request, {token_s * 1e6:.3g} us a prompt token: "
                  f"mean |TTFT error| {error:.1%}")
            if best is None or error < best[0]:
                best = (error, request_s, token_s)
    _, request_s, token_s = best
    print(f"fitted the API server: frontend_request_s {request_s}, frontend_token_s {token_s} on "
          f"{', '.join(c.id for c in group)}")
    return {"frontend_request_s": request_s, "frontend_token_s": token_s}


# The goal for a judged figure: TTFT within 25%, every other within 10%.
GOAL = {"ttft_p50_ms": 0.25}


def summary(cases: list, recorded: dict[str, dict[str, float]], quantization: str | None) -> str:
    """One line for the judged cases with these weights: how many, the largest |error| of each figure and how
    many figures miss the goal (fitted cases are left out: they chose the factors)."""
    judged = [c for c in cases if c.role == "judged" and c.quantization == quantization and c.id in recorded]
    worst: dict[str, float] = {}
    misses = 0
    for case in judged:
        for name, error in recorded[case.id].items():
            worst[name] = max(worst.get(name, 0.0), abs(error))
            misses += abs(error) > GOAL.get(name, 0.10)
    figures = ", ".join(f"{name} {value:.1%}" for name, value in worst.items())
    return (f"judged, {quantization or '16-bit'} weights: {len(judged)} cases, largest |error| {figures}; "
            f"{misses} figure(s) outside the goal (TTFT 25%, others 10%)")


def main() -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n\n")[0])
    parser.add_argument("--fit", action="store_true", help="fit each GPU's factors on its fitted cases")
    parser.add_argument("--record", action="store_true", help="write judged errors into published.json")
    args = parser.parse_args()
    print("machine load:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    cases = load_cases()
    if args.fit:
        fit(cases)
    recorded: dict[str, dict[str, float]] = {}
    start = time.process_time()
    for case in cases:
        simulated = simulate_case(case)
        errors = case_errors(case, simulated)
        weights = f", {case.quantization} weights" if case.quantization else ""
        print(f"{case.id} ({case.role}; {case.engine}, {case.gpu}, {case.model} on {case.hardware}{weights}, "
              f"{case.workload.concurrency} clients)")
        for name, value in case.measured.items():
            mark = "judged" if name in case.judged and case.role == "judged" else (
                "fitted" if name in case.judged else "not judged")
            print(f"  {name:13s} measured {value:9.2f}  simulated {simulated[name]:9.2f}  error {errors[name]:+6.1%}"
                  f"  ({mark})")
        if case.role == "judged":
            recorded[case.id] = {name: round(errors[name], 4) for name in case.judged}
    print(f"{len(cases)} cases simulated in {time.process_time() - start:.1f} s CPU")
    for weights in (None, "fp8"):
        print(summary(cases, recorded, weights))
    if args.record:
        data = json.loads(CASES_FILE.read_text(encoding="utf-8"))
        for raw in data["cases"]:
            if raw["id"] in recorded:
                raw["recorded_error"] = recorded[raw["id"]]
        CASES_FILE.write_text(dump_cases(data), encoding="utf-8")
        print(f"recorded the judged errors in {CASES_FILE}")


if __name__ == "__main__":
    main()
