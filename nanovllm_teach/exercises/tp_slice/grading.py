"""Grading ``tp_slice``: what every tensor-parallel rank holds after loading, the learner's slices against the engine's.

Role: grading. Emits no events.

The model is a small Qwen3 (``GRADED_CONFIG``: one layer, 8 query heads and 4 key/value heads, attention
biases, so that grouped-query attention and a row-parallel bias are there), its checkpoint written with
distinct values in every entry, so that any entry out of place shows. A forked grading child (``remote.run_in_child``)
builds it as every rank of 1, 2 and 4 ranks (``layers.parallel.acting_as``: no process group), sets its
linear layers' parameters to NaN, and loads the checkpoint through the engine's own loader (``models.loader.load_model``), with the exercise
point replaced by a proxy of the learner's function, which runs in the sandboxed worker (``remote``) on
plain arguments. It writes what each rank's linear layers hold (safetensors) and every call it made, with
the tensor being loaded (an outcome record).

The reference is the same run with the engine's own function, recorded once per process in a fresh
interpreter of the shipped package, which shares nothing with a notebook that patched this one (in a forked
child for the grade command, which runs nothing of a learner's: ``references.recorded_here``).
The parent compares the two, rank by rank and tensor by tensor: PASS when every rank holds exactly what the
reference's does. Otherwise the verdict names the first rank and tensor that differ and the first slice
taken differently, in numbers ("you took rows [0:8] of it, put at rows [16:24] of the rank's
self_attn.qkv_proj.weight; the reference took rows [8:16] of it, ..."), never the formula.
"""

from __future__ import annotations

import pkgutil
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable
from unittest import mock

import msgspec

from nanovllm_teach.exercises.base import DEFAULT_TIME_LIMIT_S, Exercise, GradeResult, SolutionSource, not_implemented
from nanovllm_teach.exercises.engine_grading import (AND, ENDED_AFTER_THE_RUNS, Piece, describe_failure, graded_in_worker,
                                                    installed, screened)
from nanovllm_teach.exercises.references import fresh_interpreter_environment, records_here
from nanovllm_teach.exercises.remote import ChildEnd, Worker, read_outcome, run_in_child, write_outcome
from nanovllm_teach.exercises.verdict import failure_sentence
from nanovllm_teach.exercises.worker import Failure
from nanovllm_teach.i18n import Text, say

OUTCOME = "outcome.json"
POINT = "nanovllm_teach.layers.rank_slice:rank_slice"  # what the linear layers ask which slice a rank keeps
WORLD_SIZES = (1, 2, 4)
# A Qwen3 small enough to load seven times in a blink, shaped so that every case of the slicing happens:
# grouped-query attention with whole heads on each of 4 ranks, and biases on the attention projections (as in
# Qwen2), so that a row-parallel layer (o_proj) has one.
GRADED_CONFIG = dict(hidden_size=16, intermediate_size=32, num_attention_heads=8, num_key_value_heads=4, head_dim=4,
                     num_hidden_layers=1, vocab_size=32, attention_bias=True, tie_word_embeddings=False,
                     max_position_embeddings=64, rms_norm_eps=1e-6, hidden_act="silu")
REFERENCE_LIMIT_S = 300

# Where something happened, and what each side took (the values, never the formula).
ON_RANK = Text(en="on rank {rank} of {world}", zh="在 {world} 个 rank 中的 rank {rank} 上")
LOADING = Text(en="on rank {rank} of {world}, loading {tensor}", zh="在 {world} 个 rank 中的 rank {rank} 上加载 {tensor} 时")
ROWS = Text(en="rows", zh="行")
COLUMNS = Text(en="columns", zh="列")
ENTRIES = Text(en="entries", zh="项")
TOOK = Text(en="{unit} [{start}:{end}] of it, put at {unit} [{at}:{until}] of the rank's {param}",
            zh="它的 [{start}:{end}] {unit}，放在这个 rank 的 {param} 的 [{at}:{until}] {unit}")
TOOK_NOTHING = Text(en="none of it (the rank's {param} holds zeros)", zh="什么也没取（这个 rank 的 {param} 存的是零）")
SLICES_DIFFER = Text(en="{where}, {tensor} (shape {shape}{packing}):\n  you took {yours};\n  the reference took "
                        "{reference}",
                     zh="{where}，{tensor}（形状 {shape}{packing}）：\n  你取了{yours}；\n  参考实现取了{reference}")
PACKED = Text(en=", packed in {layer}: parts={parts}, part={part}", zh="，打包在 {layer} 中：parts={parts}，part={part}")
HOLDS_OTHERWISE = Text(en="{where}, the rank's {param} (shape {shape}) differs from the reference's",
                       zh="{where}，这个 rank 的 {param}（形状 {shape}）与参考实现的不同")
DID_NOT_FIT = Text(en="\n  your rank_slice returned {result} for {tensor} (shape {shape}); the rank's {param} has "
                      "shape {local}",
                   zh="\n  你的 rank_slice 对 {tensor}（形状 {shape}）返回了 {result}；这个 rank 的 {param} 的形状是 {local}")
ALL_RANKS_MATCH = Text(en="with your {functions}, every rank in groups of {worlds} ranks holds what the reference's "
                          "does ({tensors} tensors on {ranks} ranks)",
                       zh="换上你的 {functions} 后，在由 {worlds} 个 rank 组成的各组中，每个 rank 持有的都与参考实现的相同"
                          "（{ranks} 个 rank 上共 {tensors} 个张量）")
WORLDS_SEPARATOR = Text(en=", ", zh="、")
REFERENCE_FAILED = Text(en="the reference engine failed to load the graded model: {message}",
                        zh="参考引擎加载评分用的模型时失败：{message}")


def graded_config() -> Any:
    from transformers import Qwen3Config

    return Qwen3Config(**GRADED_CONFIG)


def warm_up() -> None:
    """Import, in this process, what a grading child's loading imports (transformers' Qwen3 configuration,
    the model, the loader, safetensors), so that each child forked from it starts warm: the imports cost more
    than the loading itself. Runs none of the engine's code."""
    import safetensors.torch  # noqa: F401 (for every child to come)

    import nanovllm_teach.models.loader  # noqa: F401
    import nanovllm_teach.models.qwen3  # noqa: F401

    graded_config()  # transformers imports a model's configuration module on first use


def write_checkpoint(folder: Path) -> None:
    """The graded model's checkpoint in ``folder``: every entry of every tensor a different value (1, 2, 3,
    ... in the order of the tensor names), so that a tensor's place in a rank's parameter tells where it
    came from."""
    import torch
    from safetensors.torch import save_file

    from nanovllm_teach.models.qwen3 import checkpoint_shapes

    tensors, start = {}, 1
    for name, shape in sorted(checkpoint_shapes(graded_config()).items()):
        count = 1
        for size in shape:
            count *= size
        tensors[name] = torch.arange(start, start + count, dtype=torch.float32).reshape(shape)
        start += count
    save_file(tensors, str(folder / "model.safetensors"))


_LAYER = "model.layers.0."  # the graded model's one layer, left out of the names a learner reads


def short(name: str) -> str:
    """A name of the graded model as a learner reads it: "self_attn.qkv_proj.weight"."""
    return name.removeprefix(_LAYER)


def _checkpoint_name(param: str, shard: Any) -> str:
    """The Hugging Face tensor that goes into ``param`` as ``shard`` ("self_attn.k_proj.weight")."""
    from nanovllm_teach.models.qwen3 import Qwen3ForCausalLM

    for hf_name, (ours, shard_id) in Qwen3ForCausalLM.packed_modules_mapping.items():
        if f".{ours}." in param and shard_id == shard:
            return short(param.replace(ours, hf_name))
    return short(param)


class RankRun(msgspec.Struct):
    """One rank's loading: the calls of the slice function, and how it failed (None: it did not)."""

    world: int
    rank: int
    calls: list[dict[str, Any]]
    failure: Failure | None = None


class RankOutcome(msgspec.Struct):
    """What the child leaves beside the tensors: every rank it loaded, and whether it got to the end."""

    ranks: list[RankRun] = []
    finished: bool = False


def load_every_rank(folder: Path) -> None:
    """The child's run (the reference's or the learner's): the graded model as every rank of each world size,
    loaded with what stands at ``POINT`` (the engine's own function, or the learner's proxy). After each rank
    it writes ``w{world}r{rank}.safetensors`` (the linear layers' parameters, by ``short`` name) and the
    outcome record (``RankOutcome``); each call says the
    checkpoint tensor being loaded, the parameter it goes into and that parameter's shape on the rank."""
    from safetensors.torch import save_file

    from nanovllm_teach.layers.linear import LinearBase
    from nanovllm_teach.layers.parallel import acting_as
    from nanovllm_teach.models.loader import load_model
    from nanovllm_teach.models.qwen3 import Qwen3ForCausalLM

    checkpoint = folder / "checkpoint"  # a folder of its own: the loader reads every *.safetensors there
    checkpoint.mkdir()
    write_checkpoint(checkpoint)
    config = graded_config()
    outcome = RankOutcome()
    loading: dict[str, Any] = {}
    calls: list[dict[str, Any]] = []
    slicer = pkgutil.resolve_name(POINT)

    def recorded(*args: Any) -> Any:
        call = {**loading, "args": list(args)}
        calls.append(call)
        result = slicer(*args)
        call["result"] = list(result) if isinstance(result, tuple) else result
        return result

    def noting(name: str, param: Any, loader: Callable[..., Any]) -> Callable[..., Any]:
        def load(target: Any, tensor: Any, *shard: Any) -> None:
            loading.update(tensor=_checkpoint_name(name, shard[0] if shard else None), param=short(name),
                           local=list(param.shape))
            loader(target, tensor, *shard)
        return load

    with mock.patch(POINT.replace(":", "."), recorded):
        for world in WORLD_SIZES:
            for rank in range(world):
                calls.clear()
                failure = None
                try:
                    with acting_as(rank, world):
                        model = Qwen3ForCausalLM(config)
                    linear = {f"{prefix}.{name}": param for prefix, module in model.named_modules()
                              if isinstance(module, LinearBase) for name, param in module.named_parameters()}
                    for name, param in linear.items():
                        param.data.fill_(float("nan"))  # what no slice fills stays NaN
                        param.weight_loader = noting(name, param, param.weight_loader)
                    load_model(model, checkpoint)
                    save_file({short(name): param.data.contiguous() for name, param in linear.items()},
                              str(folder / f"w{world}r{rank}.safetensors"))
                except BaseException as error:  # whatever the learner's code raised is the verdict's business
                    failure = describe_failure(error)
                outcome.ranks.append(RankRun(world, rank, list(calls), failure))
                write_outcome(folder / OUTCOME, outcome)
                if failure is not None:
                    return
    outcome.finished = True
    write_outcome(folder / OUTCOME, outcome)


@dataclass(frozen=True)
class Loaded:
    """One run, read back by the parent: per ``(world, rank)``, the calls and the linear layers' tensors."""

    ranks: list[RankRun]
    tensors: dict[tuple[int, int], dict[str, Any]]
    finished: bool


def read_run(folder: Path) -> Loaded:
    from safetensors.torch import load_file

    outcome = read_outcome(folder / OUTCOME, RankOutcome)
    tensors = {}
    for entry in outcome.ranks:
        path = folder / f"w{entry.world}r{entry.rank}.safetensors"
        if entry.failure is None and path.is_file():
            tensors[(entry.world, entry.rank)] = load_file(str(path))
    return Loaded(outcome.ranks, tensors, outcome.finished)


_reference: Loaded | None = None
_RECORDING = threading.Lock()


def reference_run() -> Loaded:
    """The engine's own run, recorded once per process: in a fresh interpreter (``main``), or in a forked child
    where this process records its references itself (the grade command: ``references.recorded_here``)."""
    global _reference
    with _RECORDING:
        if _reference is None:
            with tempfile.TemporaryDirectory(prefix="nanovllm_teach_reference_") as tmp:
                if records_here():
                    message = f"exit code {run_in_child(load_every_rank, Path(tmp)).exitcode}"
                else:
                    done = subprocess.run([sys.executable, "-c", "import sys; from nanovllm_teach.exercises."
                                           "tp_slice.grading import main; main(sys.argv[1])", tmp],
                                          env=fresh_interpreter_environment(), capture_output=True,
                                          timeout=REFERENCE_LIMIT_S)
                    message = (done.stderr.decode(errors="replace").strip().splitlines() or ["(no message)"])[-1]
                run = read_run(Path(tmp))
                if not run.finished:
                    raise RuntimeError(say(REFERENCE_FAILED, message=message))
                _reference = run
        return _reference


def main(folder: str) -> None:
    """The reference run in a fresh interpreter, into ``folder``."""
    import torch

    torch.set_num_threads(1)
    load_every_rank(Path(folder))


def _took(call: dict[str, Any], result: Any) -> str:
    """What a slice took and where it put it, in words."""
    param = call["param"]
    if result is None:
        return say(TOOK_NOTHING, param=param)
    dim, start, length, offset = result
    unit = say(ENTRIES if len(call["args"][1]) == 1 else (ROWS if dim == 0 else COLUMNS))
    return say(TOOK, unit=unit, start=start, end=start + length, at=offset, until=offset + length, param=param)


def _shape(shape: list[int]) -> str:
    return str(list(shape))


def _packing(args: list[Any], param: str) -> str:
    parts = args[2]
    return say(PACKED, layer=param.rsplit(".", 2)[-2], part=args[3], parts=parts) if len(parts) > 1 else ""


@dataclass(frozen=True)
class ShardExercise(Exercise):
    """Graded by what every rank holds after loading the graded model with the learner's ``pieces`` in place."""

    pieces: tuple[Piece, ...]

    def grade(self, solution: SolutionSource, model: str | Path | None = None,
              time_limit: float = DEFAULT_TIME_LIMIT_S, isolate: bool | None = None) -> GradeResult:
        """``model`` is not used: the graded model is ``GRADED_CONFIG``'s, written here. ``isolate`` as for
        ``EngineExercise.grade``."""
        problem = screened(solution, self.functions)
        if problem is not None:
            return self.fail(problem)
        warm_up()
        reference = reference_run()

        def judge(worker: Worker) -> GradeResult:
            with tempfile.TemporaryDirectory(prefix="nanovllm_teach_grade_") as tmp:
                end = run_in_child(self._run_student, worker, Path(tmp))
                return self._verdict(end, read_run(Path(tmp)), reference)
        return graded_in_worker(self, solution, time_limit, isolate, judge)

    def _run_student(self, worker: Worker, folder: Path) -> None:
        import torch

        torch.set_num_threads(1)
        with installed(self.pieces, worker):
            load_every_rank(folder)

    def _verdict(self, end: ChildEnd, run: Loaded, reference: Loaded) -> GradeResult:
        tensors = 0
        for index, expected in enumerate(reference.ranks):
            world, rank = expected.world, expected.rank
            got = run.ranks[index] if index < len(run.ranks) else None
            if got is None or got.failure is not None:
                return self._failed(end, got, world, rank)
            verdict = self._compare(got, run.tensors.get((world, rank), {}), expected,
                                    reference.tensors[(world, rank)])
            if verdict is not None:
                return verdict
            tensors += len(reference.tensors[(world, rank)])
        if not run.finished or end.exitcode != 0:
            return self.fail(say(ENDED_AFTER_THE_RUNS, code=end.exitcode))
        worlds = say(WORLDS_SEPARATOR).join(str(w) for w in WORLD_SIZES)
        return GradeResult(self.name, True, f"PASS {self.name}: " + say(
            ALL_RANKS_MATCH, functions=say(AND).join(self.functions), worlds=worlds, tensors=tensors,
            ranks=len(reference.ranks)))

    def _failed(self, end: ChildEnd, got: RankRun | None, world: int, rank: int) -> GradeResult:
        """The verdict on a rank whose loading failed (or never finished)."""
        if got is None:  # the child was stopped, or ended, while it loaded this rank
            return self.fail(failure_sentence(end.failure(), say(ON_RANK, rank=rank, world=world)))
        failure = got.failure
        if failure.not_implemented:
            return not_implemented(self, failure.function)
        calls = got.calls
        last = calls[-1] if calls else {}
        where = (say(LOADING, rank=rank, world=world, tensor=last["tensor"]) if "tensor" in last
                 else say(ON_RANK, rank=rank, world=world))
        message = failure_sentence(failure, where)
        if not failure.function and "result" in last:  # the engine tripped over what the function returned
            message += say(DID_NOT_FIT, result=last["result"], tensor=last["tensor"], shape=_shape(last["args"][1]),
                           param=last["param"], local=_shape(last["local"]))
        return self.fail(message)

    def _compare(self, got: RankRun, tensors: dict[str, Any], expected: RankRun,
                 reference: dict[str, Any]) -> GradeResult | None:
        """The verdict on the first tensor of this rank that differs from the reference's (None: none does)."""
        import torch

        where = say(ON_RANK, rank=expected.rank, world=expected.world)
        for name, want in reference.items():
            have = tensors.get(name)
            if have is not None and have.shape == want.shape and torch.equal(have, want):
                continue
            mine = [c for c in got.calls if c.get("param") == name]
            theirs = [c for c in expected.calls if c.get("param") == name]
            for call, right in zip(mine, theirs):
                if call.get("result") != right["result"]:
                    args = right["args"]
                    return self.fail(say(SLICES_DIFFER, where=where, tensor=right["tensor"], shape=_shape(args[1]),
                                         packing=_packing(args, name), yours=_took(call, call.get("result")),
                                         reference=_took(right, right["result"])))
            # Every slice the same and yet another tensor: the engine's loading is not deterministic.
            return self.fail(say(HOLDS_OTHERWISE, where=where, param=name, shape=_shape(list(want.shape))))
        return None
