"""The planner's answer, made of the searches' probes: one row per configuration
(a candidate and a replica count), its cost per hour, the rate it sustains, the cheapest row that reaches the
target rate, and the rows as JSON or CSV, each with the ``simulate`` command that reproduces it.

A row's sustained rate is its replica count times what one replica sustained (``plan/probes.py``: a random split
makes each replica a Poisson stream at rate/R); its cost is its GPUs (tensor-parallel degree times replicas)
times the GPU's price per hour (``sim/prices.py``). Among the rows that reach the target, the cheapest wins, a
higher sustained rate breaking a tie, then the row's order.

Emits no events.
"""

from __future__ import annotations

import csv
import io
import json
import shlex
from dataclasses import asdict, dataclass

from nanovllm_teach.plan.probes import Candidate, MemoryFit, Objective, PlanWorkload, Probe
from nanovllm_teach.plan.rates import sustained_rate


@dataclass(frozen=True)
class PlanRow:
    candidate: Candidate
    replicas: int
    gpus: int
    cost_per_hour: float
    replica_rate: float  # requests/s one replica sustains
    sustained_rate: float  # requests/s all replicas sustain
    saturated_rate: float  # requests/s one replica completes with everything at once
    weights_gib: float  # per GPU
    kv_blocks: int  # per GPU
    longest_tokens: int
    command: str | None  # the simulate command that serves one replica's share at its sustained rate (None: a
    # recorded workload, which simulate cannot serve)

    @property
    def label(self) -> str:
        c = self.candidate
        return (f"{self.replicas}x {c.hardware} tp{c.tensor_parallel_size} seqs{c.max_num_seqs} "
                f"tokens{c.max_num_batched_tokens}" + (f" {c.quantization}" if c.quantization else ""))

    def to_dict(self) -> dict:
        return {**asdict(self.candidate), **{k: v for k, v in asdict(self).items() if k != "candidate"}}


def simulate_command(candidate: Candidate, workload: PlanWorkload, rate: float) -> str | None:
    """The ``simulate`` run of one replica at ``rate``: the same engine settings, lengths, seed and requests as the
    search's probes (its summary counts the warm-up requests too); None for a recorded workload."""
    if workload.recorded is not None:
        return None
    args = ["nanovllm-teach", "simulate", "--model", workload.model, "--hardware", candidate.hardware,
            "--tensor-parallel-size", str(candidate.tensor_parallel_size),
            "--max-num-seqs", str(candidate.max_num_seqs),
            "--max-num-batched-tokens", str(candidate.max_num_batched_tokens),
            "--max-model-len", str(workload.max_model_len), "--rate", f"{rate:g}",
            "--requests", str(workload.num_requests), "--prompt-lens", workload.prompt_lens,
            "--output-lens", workload.output_lens, "--seed", str(workload.seed)]
    if candidate.quantization:
        args += ["--quantization", candidate.quantization]
    if workload.serving_engine:
        args += ["--serving-engine", workload.serving_engine]
    return shlex.join(args)


def plan_rows(searches: dict[Candidate, list[Probe]], fits: dict[Candidate, MemoryFit], workload: PlanWorkload,
              replicas: list[int], prices: dict[str, float]) -> list[PlanRow]:
    """A row per searched candidate and replica count whose one replica sustains some rate, in the candidates'
    order."""
    rows = []
    for candidate, probes in searches.items():
        rate, fit = sustained_rate(probes), fits[candidate]
        if rate <= 0:
            continue
        command = simulate_command(candidate, workload, rate)
        for r in replicas:
            gpus = r * candidate.tensor_parallel_size
            rows.append(PlanRow(candidate, r, gpus, round(gpus * prices[candidate.hardware], 4), rate,
                                float(f"{r * rate:.6g}"), probes[0].requests_per_s, round(fit.weights_gib, 3),
                                fit.kv_blocks, fit.longest_tokens, command))
    return rows


def ranked(rows: list[PlanRow], target_rate: float) -> list[PlanRow]:
    """The rows that reach ``target_rate``, cheapest first (a higher rate, then the row's order, breaking ties)."""
    reaching = [(row.cost_per_hour, -row.sustained_rate, i, row) for i, row in enumerate(rows)
                if row.sustained_rate >= target_rate]
    return [row for *_, row in sorted(reaching)]


def results_json(rows: list[PlanRow], workload: PlanWorkload, objective: Objective, target_rate: float,
                 steps: int) -> str:
    """The whole answer as JSON (keys in a fixed order: two runs of one search give the same bytes)."""
    best = ranked(rows, target_rate)
    described = asdict(workload)
    if workload.recorded is not None:  # its name and size, not every request's lengths
        recorded = workload.recorded
        described["recorded"] = {"source": recorded.source, "requests": len(recorded.prompt_lens),
                                 "mean_rate": float(f"{recorded.mean_rate:.6g}")}
    return json.dumps({"workload": described, "objective": asdict(objective), "target_rate": target_rate,
                       "search_steps": steps, "cheapest": best[0].to_dict() if best else None,
                       "rows": [row.to_dict() for row in rows]}, indent=1) + "\n"


def results_csv(rows: list[PlanRow]) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(rows[0].to_dict()) if rows else ["hardware"], lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow(row.to_dict())
    return buffer.getvalue()
