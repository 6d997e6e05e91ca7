"""What recording costs: the engine with recording off vs. the same engine with its emit lines deleted, and
recording on vs. off.

Recording off should be free: every emit site is ``if self.rec.enabled: self.rec.record(...)``, or, in the
orchestration layer that says the scheduler's decisions (``engine/teaching.py``), a method that starts with
``if not self.rec.enabled: return``; so with a ``NullRecorder`` no payload is built. Stubbing ``record`` out
would not show it (the arguments would still be built), so this benchmark builds, in this process, a second
copy of the modules that emit on the engine's path (``engine/teaching.py``, ``decode_paths.py``, ``model_runner.py``,
``llm_engine.py``, the shell ``frontend.py`` and ``nanovllm_teach/llm.py``, whose ``LLM`` it runs) from their
source with every emit line deleted (``ast``). The resources layer (``scheduler.py``, ``block_manager.py``,
``transaction.py``) emits nothing (it returns decision records) and is shared, unchanged. Deleted:

- every ``if <...>.rec.enabled:`` block (its ``else``, if any, stays);
- every ``if not <...>.rec.enabled: return`` at the top level of a function, with everything after it in
  the function (which runs only when recording): an emit-free ``Teaching`` method does nothing;
- every statement that is a call to ``<...>.rec.record(...)`` (an unguarded site
  still builds its arguments: deleting it counts that cost too);
- every statement that is a call to the teaching layer, ``<...>.teaching.<method>(...)``: only the calls in
  its arguments stay (``transaction.rollback(...)`` in ``self.teaching.rolled_back(...)`` is the engine's
  work, not instrumentation);
- every ``with <...>.rec.at_step(...)`` / ``rec.paused()`` / ``rec.flushing_deferred()`` is taken out of its
  ``with`` statement, which is replaced by its body if nothing else is left in it.

Three engines then run the same workload, interleaved (the order rotates every repeat) so that a change in
the machine's load hits all three alike:

- **off**: ``LLM(model)``, recording off (``NullRecorder``);
- **deleted**: the copy without emit lines, also recording off: what the engine costs with no
  instrumentation at all;
- **on**: ``LLM(model, trace=<file>.jsonl)``, full recording to a JSONL file.

Each repeat uses fresh random prompts (the same lengths every repeat), the same for the three engines, so
the prefix cache never turns a repeat into a cache hit, and the three must return the same greedy tokens
(checked). Printed: the median wall and CPU (``process_time``) seconds of each engine, the ratios
off/deleted (the cost of instrumentation with recording off) and on/off (the cost of recording), of the
medians and of the fastest runs, and the difference per engine step in microseconds.

A difference of a fraction of a percent is far below the noise of a machine whose cores other processes
share (``uptime`` is printed before and after). So the same three engines run the workload a second time
with their model replaced by a stand-in that returns zeros (``StandInModel``): every scheduling decision,
block operation, input tensor, sampling call and emit site still runs, only the model's arithmetic (the
same in all three) is gone, so the instrumentation's cost stands out. Its difference per step (the
fastest runs' CPU time) over the real run's time per step is the instrumentation's share of a real run.

Usage::

    python benchmarks/bench_recording.py [--num-requests 48] [--min-len 16] [--max-len 192]
                                         [--repeats 10] [--host-repeats 50] [--threads 1] [--seed 0]
                                         [--model PATH]
"""

from __future__ import annotations

import argparse
import ast
import inspect
import random
import statistics
import subprocess
import sys
import tempfile
import types
from pathlib import Path
from time import perf_counter, process_time

import torch

from nanovllm_teach import SamplingParams, default_model_path
from nanovllm_teach.llm import LLM

# Dependencies first: each module's ``from ... import`` then picks up the copies already made.
ENGINE_MODULES = ("nanovllm_teach.engine.teaching", "nanovllm_teach.engine.decode_paths",
                  "nanovllm_teach.engine.model_runner",
                  "nanovllm_teach.engine.llm_engine", "nanovllm_teach.engine.frontend", "nanovllm_teach.llm")
REC_CONTEXTS = ("at_step", "paused", "flushing_deferred")


def _is_rec_method(node: ast.AST, names: tuple[str, ...]) -> bool:
    """``<...>.rec.<name>`` for one of ``names`` (``self.rec.enabled``, ``self.rec.record``, ...)."""
    return (isinstance(node, ast.Attribute) and node.attr in names
            and isinstance(node.value, ast.Attribute) and node.value.attr == "rec")


def _is_not_enabled(test: ast.AST) -> bool:
    """``not <...>.rec.enabled``."""
    return isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not) and _is_rec_method(test.operand, ("enabled",))


def _is_off_guard(node: ast.AST) -> bool:
    """``if not <...>.rec.enabled: return``, the first line of an emit-only method."""
    return (isinstance(node, ast.If) and _is_not_enabled(node.test) and not node.orelse and len(node.body) == 1
            and isinstance(node.body[0], ast.Return) and node.body[0].value is None)


def _is_teaching_call(node: ast.AST) -> bool:
    """``<...>.teaching.<method>(...)``: a call into the layer that turns decisions into events."""
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Attribute) and node.func.value.attr == "teaching")


class DeleteEmitLines(ast.NodeTransformer):
    """Deletes the instrumentation (see the module docstring); ``deleted`` counts the statements taken out."""

    def __init__(self) -> None:
        self.deleted = 0

    def visit_FunctionDef(self, node: ast.FunctionDef):
        for i, statement in enumerate(node.body):
            if _is_off_guard(statement):  # the rest of the function runs only when recording
                self.deleted += 1
                node.body = node.body[:i]
                break
        return self.generic_visit(node)

    def visit_If(self, node: ast.If):
        if _is_not_enabled(node.test):  # a guard anywhere else: deleting it would change what runs
            raise ValueError(f"an emit guard this benchmark cannot delete (line {node.lineno}): "
                             f"{ast.unparse(node.test)}")
        self.generic_visit(node)
        if _is_rec_method(node.test, ("enabled",)):
            self.deleted += 1
            return node.orelse
        return node

    def visit_Expr(self, node: ast.Expr):
        if isinstance(node.value, ast.Call) and _is_rec_method(node.value.func, ("record",)):
            self.deleted += 1
            return None
        if _is_teaching_call(node.value):
            self.deleted += 1
            call = node.value
            work = [arg for arg in call.args + [k.value for k in call.keywords]
                    if any(isinstance(n, ast.Call) for n in ast.walk(arg))]
            return [ast.Expr(arg) for arg in work] or None
        return node

    def visit_With(self, node: ast.With):
        self.generic_visit(node)
        kept = [item for item in node.items if not (isinstance(item.context_expr, ast.Call)
                                                     and _is_rec_method(item.context_expr.func, REC_CONTEXTS))]
        if len(kept) == len(node.items):
            return node
        self.deleted += 1
        if not kept:
            return node.body
        node.items = kept
        return node

    def generic_visit(self, node: ast.AST) -> ast.AST:
        super().generic_visit(node)
        if getattr(node, "body", None) == []:  # a block whose every statement went keeps a ``pass``
            node.body.append(ast.Pass())
        return node


def engine_without_emit_lines() -> tuple[type, int]:
    """``LLM`` built from copies of the engine modules with every emit line deleted, and how many
    statements were deleted. The real modules are left as they were."""
    saved = {name: sys.modules[name] for name in ENGINE_MODULES}
    deleter = DeleteEmitLines()
    try:
        for name in ENGINE_MODULES:
            real = saved[name]
            tree = ast.fix_missing_locations(deleter.visit(ast.parse(inspect.getsource(real))))
            copy = types.ModuleType(name)
            copy.__file__, copy.__package__ = real.__file__, real.__package__
            sys.modules[name] = copy
            exec(compile(tree, f"{real.__file__} (emit lines deleted)", "exec"), copy.__dict__)
        return sys.modules[ENGINE_MODULES[-1]].LLM, deleter.deleted
    finally:
        sys.modules.update(saved)


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def make_workload(rng: random.Random, lengths: list[tuple[int, int]], vocab: int):
    prompts = [[rng.randrange(vocab) for _ in range(p)] for p, _ in lengths]
    params = [SamplingParams(temperature=0.0, max_tokens=o, ignore_eos=True) for _, o in lengths]
    return prompts, params


def timed(engine, prompts, params) -> tuple[float, float, int, list[list[int]]]:
    steps = engine.num_steps
    wall, cpu = perf_counter(), process_time()
    outputs = engine.generate(prompts, params, use_tqdm=False)
    return (perf_counter() - wall, process_time() - cpu, engine.num_steps - steps,
            [out["token_ids"] for out in outputs])


class StandInModel(torch.nn.Module):
    """Zeros for hidden states and logits: with it the engine's host work and every emit site still run,
    and the model's arithmetic, the same in every variant, no longer hides their cost."""

    def __init__(self, hidden_size: int, vocab_size: int) -> None:
        super().__init__()
        self.hidden_size, self.vocab_size = hidden_size, vocab_size

    def forward(self, input_ids: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        return torch.zeros(input_ids.size(0), self.hidden_size)

    def compute_logits(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return torch.zeros(hidden_states.size(0), self.vocab_size)


def measure(engines: dict, lengths: list[tuple[int, int]], repeats: int, rng: random.Random,
            vocab: int) -> dict[str, list[tuple[float, float, int]]]:
    """(wall s, cpu s, steps) of each engine's ``generate`` per repeat, interleaved, order rotating."""
    results: dict[str, list[tuple[float, float, int]]] = {name: [] for name in engines}
    names = list(engines)
    for repeat in range(repeats + 1):  # repeat 0 warms every engine up and is not counted
        prompts, params = make_workload(rng, lengths, vocab)
        order = names[repeat % 3:] + names[:repeat % 3]
        tokens = {}
        for name in order:
            wall, cpu, steps, tokens[name] = timed(engines[name], prompts, params)
            if repeat:
                results[name].append((wall, cpu, steps))
        assert tokens["off"] == tokens["deleted"] == tokens["on"], "the three engines disagree"
    return results


def report(title: str, results: dict[str, list[tuple[float, float, int]]]) -> None:
    def stat(name: str, index: int, pick) -> float:
        return pick([run[index] for run in results[name]])

    steps = results["off"][0][2]
    print(f"\n{title}: {len(results['off'])} repeats, {steps} engine steps per run; seconds:")
    print(f"{'':10}{'wall median':>12}{'wall min':>10}{'cpu median':>12}{'cpu min':>10}")
    for name in results:
        print(f"{name:10}{stat(name, 0, statistics.median):12.3f}{stat(name, 0, min):10.3f}"
              f"{stat(name, 1, statistics.median):12.3f}{stat(name, 1, min):10.3f}")
    for label, a, b in (("off / deleted (instrumentation, recording off)", "off", "deleted"),
                        ("on / off (recording to JSONL)", "on", "off")):
        ratios = [f"{kind} {stat(a, i, pick) / stat(b, i, pick):.4f}"
                  for i, clock in ((0, "wall"), (1, "cpu")) for kind, pick in
                  ((f"{clock} median", statistics.median), (f"{clock} min", min))]
        per_step_us = (stat(a, 1, min) - stat(b, 1, min)) / steps * 1e6
        print(f"  {label}: " + ", ".join(ratios) + f"; cpu min {per_step_us:+.1f} us per step")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", type=Path, default=Path(default_model_path()))
    ap.add_argument("--num-requests", type=int, default=48)
    ap.add_argument("--min-len", type=int, default=16)
    ap.add_argument("--max-len", type=int, default=192)
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--host-repeats", type=int, default=50,
                    help="repeats of the second measurement, with the stand-in model (default 50)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    rng = random.Random(args.seed)
    lengths = [(rng.randint(args.min_len, args.max_len), rng.randint(args.min_len, args.max_len))
               for _ in range(args.num_requests)]
    print(f"before: {uptime()}")
    print(f"workload: {args.num_requests} requests, prompts and outputs {args.min_len}..{args.max_len} tokens, "
          f"greedy, ignore_eos; torch threads {args.threads}")
    stripped_engine, deleted = engine_without_emit_lines()
    print(f"deleted: {deleted} emit statements or guarded blocks from {len(ENGINE_MODULES)} engine modules")
    with tempfile.TemporaryDirectory() as tmp:
        engines = {"off": LLM(args.model), "deleted": stripped_engine(args.model),
                   "on": LLM(args.model, trace=Path(tmp) / "bench.jsonl")}
        hf = engines["off"].config.hf_config
        with_model = measure(engines, lengths, args.repeats, rng, hf.vocab_size)
        for engine in engines.values():
            engine.model_runner.model = StandInModel(hf.hidden_size, hf.vocab_size)
            engine.model_runner.decode_paths.native = None  # else decode steps would still run the native step
        host_only = measure(engines, lengths, args.host_repeats, rng, hf.vocab_size)
        for engine in engines.values():
            engine.close()
    print(f"after: {uptime()}")
    report("the shipped model", with_model)
    report("the stand-in model (host work and emit sites only)", host_only)
    print("\nThe instrumentation's share of a real run: the stand-in's cpu-min difference per step over the "
          "real run's cpu-min time per step:")
    real_step = min(run[1] for run in with_model["off"]) / with_model["off"][0][2]
    for a, b in (("off", "deleted"), ("on", "off")):
        diff = (min(r[1] for r in host_only[a]) - min(r[1] for r in host_only[b])) / host_only["off"][0][2]
        print(f"  {a} - {b}: {diff * 1e6:+.1f} us of {real_step * 1e6:.0f} us per step = {diff / real_step:+.2%}")


if __name__ == "__main__":
    main()
