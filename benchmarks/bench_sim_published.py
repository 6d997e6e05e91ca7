"""The simulator against published serving measurements of real engines (``nanovllm_teach/sim/published.json``).

Every case runs through the public path (``LLM(model, runner="simulated", hardware=...)`` and
``serve_workload`` with the case's clients, lengths and ``ignore_eos``) on its GPU's own efficiency factors
(``Efficiency.for_device``). Printed per case: fitted or judged, each measured figure beside the simulated
one and the error; figures the source does not let us reproduce are printed and marked "not judged".

``--fit``: for each GPU with fitted cases, the memory efficiency that makes the simulated median TPOT of its
fitted cases match (bisection; the one factor a low-concurrency decode depends on), printed for
``DEVICE_EFFICIENCY`` in ``nanovllm_teach/sim/cost_model.py``. ``--record``: write each judged case's
errors into ``published.json`` as ``recorded_error`` (what ``tests/test_sim_published.py`` holds it to).

Usage: ``python benchmarks/bench_sim_published.py [--fit] [--record]``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from nanovllm_teach.sim.cost_model import Efficiency
from nanovllm_teach.sim.published import CASES_FILE, case_errors, dump_cases, load_cases, simulate_case


def fit_memory(cases: list) -> dict[str, float]:
    """Per GPU: the memory factor whose simulated median TPOT matches the mean of its fitted cases' (bisection
    on the mean signed error, which falls as the factor grows)."""
    fitted: dict[str, float] = {}
    for hardware in sorted({c.hardware for c in cases if c.role == "fitted"}):
        mine = [c for c in cases if c.role == "fitted" and c.hardware == hardware]
        lo, hi = 0.3, 1.0
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "factors.json"
            for _ in range(12):
                mid = (lo + hi) / 2
                path.write_text(json.dumps(replace(Efficiency.for_device(hardware), memory=mid).to_dict()))
                error = sum(case_errors(c, simulate_case(c, path))["tpot_p50_ms"] for c in mine) / len(mine)
                lo, hi = (mid, hi) if error > 0 else (lo, mid)
        fitted[hardware] = round((lo + hi) / 2, 3)
        print(f"fitted {hardware}: memory {fitted[hardware]} on {', '.join(c.id for c in mine)}")
    return fitted


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fit", action="store_true", help="fit each GPU's memory factor on its fitted cases")
    parser.add_argument("--record", action="store_true", help="write judged errors into published.json")
    args = parser.parse_args()
    print("machine load:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    cases = load_cases()
    if args.fit:
        fit_memory(cases)
    recorded: dict[str, dict[str, float]] = {}
    start = time.process_time()
    for case in cases:
        simulated = simulate_case(case)
        errors = case_errors(case, simulated)
        print(f"{case.id} ({case.role}; {case.engine}, {case.gpu}, {case.model} on {case.hardware}, "
              f"{case.workload.concurrency} clients)")
        for name, value in case.measured.items():
            mark = "judged" if name in case.judged and case.role == "judged" else (
                "fitted" if name in case.judged else "not judged")
            print(f"  {name:13s} measured {value:9.2f}  simulated {simulated[name]:9.2f}  error {errors[name]:+6.1%}"
                  f"  ({mark})")
        if case.role == "judged":
            recorded[case.id] = {name: round(errors[name], 4) for name in case.judged}
    print(f"{len(cases)} cases simulated in {time.process_time() - start:.1f} s CPU")
    if args.record:
        data = json.loads(CASES_FILE.read_text(encoding="utf-8"))
        for raw in data["cases"]:
            if raw["id"] in recorded:
                raw["recorded_error"] = recorded[raw["id"]]
        CASES_FILE.write_text(dump_cases(data), encoding="utf-8")
        print(f"recorded the judged errors in {CASES_FILE}")


if __name__ == "__main__":
    main()
