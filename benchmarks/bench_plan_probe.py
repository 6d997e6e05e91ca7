"""What one planner probe costs, and what stopping a failing probe early saves: three Llama-3.1-8B candidates
(H100, two A100 80GB at TP 2, H200), p99 TTFT <= 1 s and p99 TPOT <= 50 ms, ShareGPT's lengths, each searched in
full (a saturation probe and five bisections, 1,200 requests a probe), once as ``plan`` runs them and once with
every probe run to its end.

Prints, for both: each candidate's sustained rate (they must be equal), the engine steps of all probes, the
CPU seconds per probe (``time.process_time``: less swayed by other processes than the wall clock, not immune),
the steps saved, and the load average. Steps do not depend on the machine; seconds do.

Usage: ``python benchmarks/bench_plan_probe.py``.
"""

from __future__ import annotations

import os
import time

from nanovllm_teach.plan import probes
from nanovllm_teach.plan.probes import Candidate, Objective, PlanWorkload, probe
from nanovllm_teach.plan.rates import next_rate, sustained_rate
from nanovllm_teach.workload import arrivals

WORKLOAD = PlanWorkload("llama-3.1-8b")
OBJECTIVE = Objective(ttft_ms=1000.0, tpot_ms=50.0)
CANDIDATES = [Candidate("h100-sxm", 1, 256, 8192), Candidate("a100-80gb", 2, 128, 16384),
              Candidate("h200", 1, 128, 8192)]
STEPS = 5


def searches() -> tuple[dict[str, float], float, int]:
    """Every candidate's sustained rate, the CPU seconds of all probes, and how many probes ran."""
    rates, cpu, count = {}, 0.0, 0
    for candidate in CANDIDATES:
        history: list = []
        while (rate := next_rate(history, STEPS)) is not False:
            start = time.process_time()
            history.append(probe(candidate, WORKLOAD, OBJECTIVE, rate))
            cpu += time.process_time() - start
            count += 1
        rates[candidate.key] = sustained_rate(history)
    return rates, cpu, count


def main() -> None:
    steps_taken: list[int] = []
    serve = arrivals.serve_workload

    def counting(*args, **kwargs):
        result = serve(*args, **kwargs)
        steps_taken.append(result.num_steps)
        return result

    arrivals.serve_workload = counting  # probe imports it from the module at each call
    probe(CANDIDATES[0], WORKLOAD, OBJECTIVE, 5.0)  # the imports and the first engine, paid once, not measured
    steps_taken.clear()
    early_rates, early_cpu, n = searches()
    early_steps = sum(steps_taken)
    steps_taken.clear()
    watch = probes.FailureWatch.of
    probes.FailureWatch.of = classmethod(lambda cls, *args: None)  # every probe to its end
    try:
        whole_rates, whole_cpu, _ = searches()
    finally:
        probes.FailureWatch.of = watch
    whole_steps = sum(steps_taken)
    print(f"sustained rates, stopping early: {early_rates}")
    print(f"sustained rates, to the end:     {whole_rates}  (equal: {early_rates == whole_rates})")
    print(f"{n} probes each way; engine steps {early_steps} against {whole_steps} ({1 - early_steps / whole_steps:.1%} "
          f"saved); CPU s per probe {early_cpu / n:.2f} against {whole_cpu / n:.2f}; load average "
          f"{'/'.join(f'{x:.1f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
