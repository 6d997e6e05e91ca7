"""The far side of ``build check DIR final``: the learner's engine run alone, in the sandbox, on ``FINAL``.

Role: teaching (the track), inside the grading sandbox (``inside`` hands over to ``run_final``). Emits no
events (the learner's engine emits its own, into the trace sent back).

Nothing of the reference may stand in for the learner: before any of their files is read,
``RefuseReference`` stands first on ``sys.meta_path`` and refuses ``nanovllm_teach.engine``, ``.layers`` and
``.models`` (and none of them is loaded yet: ``run_final`` checks), naming the module and the learner's
file that asked. What runs is the learner's package: the glue (``myvllm/glue``, the engine's other code,
copied by ``build start``) with every seam's placeholder replaced by the learner's own function from their
chapter files (``wire``). The rest of the package stays importable (settings, sampling parameters, the
``utils`` the layers use, the trace recorder, i18n); the tokenizer is transformers'. The one answer (``wire.Frame``) is the run's tokens and its TEACHING trace (JSONL), or
what stopped it: a refused import, a chapter that is not written or does not load, what the run raised.
"""

from __future__ import annotations

import importlib
import importlib.abc
import linecache
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable

from nanovllm_teach.exercises.base import visible
from nanovllm_teach.i18n import Text, say
from nanovllm_teach.runs import Workload
from nanovllm_teach.sampling_params import SamplingParams
from nanovllm_teach.track.chapters import CHAPTERS
from nanovllm_teach.track.extract import is_written
from nanovllm_teach.track.glue import GLUE, glue_name, is_blocked
from nanovllm_teach.track.seams import PACKAGE, Chapter, Seam


def _prompts() -> list[list[int]]:
    """Four prompts after one 12-token prefix (one of 30 tokens), then one of its own."""
    prefix = [int(t) for t in "176 458 36 573 231 283 98 131 454 299 511 47".split()]
    tails = ([90, 91, 92], [300 + i for i in range(18)], [120, 121, 122, 123, 124], [77, 78])
    return [prefix + list(tail) for tail in tails] + [[500, 17, 230, 64, 399, 12, 88, 145, 321]]


# Token-id prompts, greedy and ignore_eos: when things happen does not depend on what the model writes. 16
# tokens a step chunk the 30-token prompt; the later prompts find the shared prefix's blocks cached; 16
# blocks of 4 tokens run out while all five decode, and the newest are preempted.
FINAL = Workload(
    "final",
    Text(en="5 requests, 4 sharing a 12-token prefix, 16 tokens a step, 16 KV blocks of 4 tokens: prefix-cache "
            "hits, a chunked prefill and preemptions",
         zh="5 个请求，其中 4 个共享 12 个 token 的前缀；每步 16 个 token，16 个 KV 块、每块 4 个 token：前缀缓存命中、"
            "分块预填充与抢占都会发生"),
    dict(device="cpu", enforce_eager=True, attention_backend="torch", max_model_len=128, kvcache_block_size=4,
         num_kvcache_blocks=16, max_num_seqs=8, max_num_batched_tokens=16),
    _prompts(), [SamplingParams(temperature=0.0, max_tokens=n, ignore_eos=True) for n in (14, 10, 16, 12, 18)])

REFUSED = Text(en="{file} imports {module}: final runs your engine alone, without the reference's engine, layers "
                  "or models (import what you do not write from {glue})",
               zh="{file} 导入了 {module}：final 只运行你自己的引擎，不能用参考实现的 engine、layers 或 models"
                  "（你不写的部分从 {glue} 导入）")
SOMEWHERE = Text(en="the package", zh="包里的代码")


def final_chapters() -> list[Chapter]:
    """The chapters whose functions the engine runs (chapter 6's contiguous cache is the track's own)."""
    return [chapter for chapter in CHAPTERS if all(is_blocked(seam.module) for seam in chapter.seams)]


class RefuseReference(importlib.abc.MetaPathFinder):
    """Refuses the reference's modules, naming the learner's file that asked; remembers every refusal (a
    learner's ``except ImportError`` does not hide one)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.refused: list[str] = []

    def find_spec(self, name: str, path: object = None, target: object = None) -> None:
        if not is_blocked(name):
            return None
        frame, asker, line = sys._getframe(1), say(SOMEWHERE), ""
        while frame is not None:  # the innermost of the learner's files on the stack is the one importing
            file = Path(frame.f_code.co_filename)
            if file.is_relative_to(self.folder):
                asker = f"{file.relative_to(self.folder).as_posix()}:{frame.f_lineno}"
                # The statement as written: the finder is asked for each package on the way (the engine's
                # first), the line names the module the learner meant.
                line = linecache.getline(str(file), frame.f_lineno).strip()
                break
            frame = frame.f_back
        module = f"{name} ({line[:200]})" if line else name
        self.refused.append(say(REFUSED, file=visible(asker), module=visible(module), glue=GLUE))
        raise ModuleNotFoundError(self.refused[-1], name=name)


def _learners(chapters: list[Chapter]) -> tuple[list[tuple[Seam, Callable[..., Any]]], dict[str, Any]]:
    """Each written seam with the learner's function, or the problem (``{"load_error": [file, error]}``,
    ``{"not_written": [[chapter, [names]], ...]}``)."""
    pieces, unwritten = [], []
    for chapter in chapters:
        try:
            module = importlib.import_module(chapter.file.removesuffix(".py").replace("/", "."))
        except Exception as error:  # the learner's file: anything it raises is theirs to see
            return [], {"load_error": [chapter.file, f"{type(error).__name__}: {error}"[:500]]}
        names = []
        for seam in chapter.seams:
            value: Any = module
            for part in seam.qualname.split("."):
                value = vars(value).get(part) if hasattr(value, "__dict__") else None
            if callable(value) and is_written(value):
                pieces.append((seam, value))
            else:
                names.append(seam.qualname)
        if names:
            unwritten.append([chapter.number, names])
    return pieces, ({"not_written": unwritten} if unwritten else {})


def wire(pieces: list[tuple[Seam, Callable[..., Any]]]) -> None:
    """Each learner's function where the glue's placeholder was: a method on the glue's class, a function in
    every module of the package that bound the placeholder (``from ... import rms_norm`` binds its own)."""
    for seam, function in pieces:
        glue = importlib.import_module(glue_name(seam.module))
        owner, _, name = seam.qualname.rpartition(".")
        if owner:
            setattr(getattr(glue, owner), name, function)
            continue
        placeholder = getattr(glue, name)
        for module_name, module in list(sys.modules.items()):
            if module is None or not module_name.startswith(PACKAGE + "."):
                continue
            for attribute, value in list(vars(module).items()):
                if value is placeholder:
                    setattr(module, attribute, function)


def run_engine(package: str, model_path: str, trace_path: Path) -> list[list[int]]:
    """``FINAL`` through the engine of ``package`` (the learner's glue, ``myvllm.glue``, in the sandbox; the
    reference, ``nanovllm_teach``, outside), nano-vllm's way (``LLMEngine.generate``), its TEACHING trace
    written to ``trace_path``: each request's tokens."""
    from transformers import AutoTokenizer

    from nanovllm_teach.settings import Settings
    from nanovllm_teach.trace.recorder import TraceRecorder

    config_module = importlib.import_module(f"{package}.config")
    runner = importlib.import_module(f"{package}.engine.runner")
    model_runner = importlib.import_module(f"{package}.engine.model_runner")
    llm_engine = importlib.import_module(f"{package}.engine.llm_engine")
    config = config_module.Config.resolve(model_path, Settings.from_kwargs(dict(FINAL.settings)))
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    engine = llm_engine.LLMEngine(
        config, recorder=TraceRecorder(trace_path, keep_in_memory=False), clock=runner.WallClock(),
        make_runner=lambda config, recorder: model_runner.ModelRunner(config, 0, recorder),
        trace_header=config.trace_header({"workload": FINAL.name}, None), tokenizer=tokenizer,
        eos_token_id=tokenizer.eos_token_id)
    try:
        seqs = engine.generate(FINAL.prompts_for(tokenizer), list(FINAL.params), use_tqdm=False)
    finally:
        engine.close()
    return [[int(t) for t in seq.completion_token_ids] for seq in seqs]


def run_final(folder: Path, model_path: str) -> dict[str, Any]:
    """The answer of the final run on the learner's package unpacked at ``folder`` (the module docstring's)."""
    loaded = [name for name in sys.modules if is_blocked(name)]
    assert not loaded, f"the reference is loaded before the learner's code: {loaded}"
    block = RefuseReference(folder)
    sys.meta_path.insert(0, block)
    sys.path.insert(1, str(folder))
    pieces, problem = _learners(final_chapters())
    if block.refused:
        return {"refused": block.refused[0]}
    if problem:
        return problem
    for module in ("config", "engine.llm_engine", "engine.model_runner"):  # every placeholder bound, then wired
        importlib.import_module(f"{GLUE}.{module}")
    wire(pieces)
    try:
        with tempfile.TemporaryDirectory() as scratch:
            path = Path(scratch) / "final.jsonl"
            tokens = run_engine(GLUE, model_path, path)
            trace = path.read_text(encoding="utf-8")
    except Exception as error:  # the learner's engine: what it raised is the answer
        return {"refused": block.refused[0]} if block.refused else {
            "raised": [type(error).__name__, str(error)[:500]]}
    if block.refused:
        return {"refused": block.refused[0]}
    return {"tokens": tokens, "trace": trace}
