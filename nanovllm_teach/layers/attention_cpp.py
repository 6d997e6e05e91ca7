"""Execution layer: the ``cpp`` attention backend — the torch backend with its decode attention replaced by a
C++ kernel that reads the KV cache in place, through the block table (``kernels/paged_decode_cpu.cpp``).

The torch backend copies every sequence's cached rows out before attending over them (see
``attention_torch.py`` for why that is the fastest PyTorch's own operators can do); the kernel reads each
row once, where it lies. Storing K/V and prefill are the torch backend's, unchanged: a prefill step reads
each row once already.

The kernel is compiled the first time a process asks for it, with PyTorch's C++ extension loader
(``torch.utils.cpp_extension.load``, which runs ``ninja``): a C++ compiler must be installed (``c++``, or
the one ``CXX`` names). The library it builds is kept in PyTorch's extension cache
(``~/.cache/torch_extensions``, or ``TORCH_EXTENSIONS_DIR``), in a folder named after the Python and torch
versions and a hash of the source, the flags and the processor, so only the first start on a machine pays
the build (about 10 s); later starts load the library without a compiler. The kernel computes in float32
on a CPU; ``attention_backend="auto"`` picks this backend there when the build succeeds, and the torch
backend otherwise. Emits no events.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import os
import platform
import shutil
import sys
import time
from pathlib import Path

import torch

from nanovllm_teach.i18n import Text, say
from nanovllm_teach.layers.attention_torch import TorchAttentionBackend
from nanovllm_teach.utils.context import Context

SOURCE = Path(__file__).resolve().parent.parent / "kernels" / "paged_decode_cpu.cpp"
EXTENSION_NAME = "nanovllm_teach_cpp"
# The kernel's working arrays are sized for these (kMaxHeads, kMaxHeadDim in the C++ file); every Qwen3 fits.
MAX_HEADS = 64  # query heads (on one tensor-parallel rank)
MAX_HEAD_DIM = 256

KERNEL = Text(en="the C++ decode-attention kernel", zh="C++ 解码注意力内核")
NOT_ON_CPU = Text(en="the C++ decode kernel runs on a CPU, not on {device}",
                  zh="C++ 解码内核只在 CPU 上运行，不能在 {device} 上运行")
NOT_FLOAT32 = Text(en="the C++ decode kernel computes in float32, not {dtype}",
                   zh="C++ 解码内核用 float32 计算，不支持 {dtype}")
HEAD_DIM_TOO_LARGE = Text(en="the C++ decode kernel handles head_dim up to {most}, not {head_dim}",
                          zh="C++ 解码内核支持的 head_dim 最大为 {most}，这里是 {head_dim}")
HEAD_DIM_NOT_MULTIPLE = Text(en="the C++ decode kernel needs a head_dim that is a multiple of {multiple}, not {head_dim}",
                             zh="C++ 解码内核要求 head_dim 是 {multiple} 的倍数，这里是 {head_dim}")
TOO_MANY_HEADS = Text(en="the C++ decode kernel handles up to {most} query heads, not {heads}",
                      zh="C++ 解码内核最多支持 {most} 个 query 头，这里是 {heads}")
NO_COMPILER = Text(en="no C++ compiler found ({compiler!r} is not on PATH; install one, or name it in CXX)",
                   zh="找不到 C++ 编译器（PATH 上没有 {compiler!r}；请安装一个，或用 CXX 指定）")
BUILD_FAILED = Text(en="building {source} failed: {first_line}", zh="构建 {source} 失败：{first_line}")
BUILDING = Text(en="nanovllm_teach: building {what} (once per machine) from {source} ...",
                zh="nanovllm_teach：正在从 {source} 构建{what}（每台机器只需一次）……")
BUILT = Text(en="nanovllm_teach: built {what} in {seconds:.0f} s, cached in {folder}",
             zh="nanovllm_teach：{what}已构建，用时 {seconds:.0f} 秒，缓存在 {folder}")
# Why a native library could not be built or loaded: a Text and its values, said when shown (the outcome is
# kept for the whole process, and the language may change in between).
NativeProblem = tuple[Text, dict[str, object]]


def said(problem: NativeProblem | None) -> str | None:
    """``problem`` in the language now (None: there was none)."""
    return None if problem is None else say(problem[0], **problem[1])
# The C++ kernels work in whole vectors (4, 8 or 16 floats by processor): a width they loop over (head_dim,
# and in the native decode step hidden_size and intermediate_size) must be a multiple of 16, as every Qwen3's is.
WIDTH_MULTIPLE = 16
STALE_LOCK_SECONDS = 600


def _compiler_flags() -> list[str]:
    # -march=native lets the compiler use the vector units this processor has; the library is built where it
    # runs and cached per processor (``_build_folder``), so that is safe. Elsewhere the compiler's defaults stand.
    flags = ["-O3", "-fno-math-errno"]
    if platform.machine() in ("x86_64", "AMD64"):
        flags.append("-march=native")
        # ATen's vector type (at::vec::Vectorized, used by the kernels) takes its AVX2 or AVX-512 form, and
        # SLEEF's vectorised exp from libtorch, only when told which, as ATen's own CPU kernels and inductor's
        # generated C++ are: the capability torch itself picked on this processor.
        capability = torch.backends.cpu.get_cpu_capability()
        if capability in ("AVX2", "AVX512"):
            flags += [f"-DCPU_CAPABILITY_{capability}", f"-DCPU_CAPABILITY={capability}"]
    if sys.platform.startswith("linux"):
        # The parallel loop is OpenMP's, run by the OpenMP library PyTorch has already loaded.
        flags.append("-fopenmp")
    return flags


def _processor() -> str:
    """What ``-march=native`` compiles for: on Linux the processor's model and instruction-set flags (a home
    folder shared by machines of several kinds must not hand one kind's library to another)."""
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        lines = cpuinfo.read_text(errors="replace").splitlines()
        return "\n".join(next((line for line in lines if line.startswith(key)), "") for key in ("model name", "flags"))
    return f"{platform.machine()} {platform.processor()}"


def _build_folder(source: Path = SOURCE, name: str = EXTENSION_NAME) -> Path:
    """One folder per source, compiler flags, processor, Python and torch: a library built from another
    source, for another processor or against another torch is never loaded."""
    from torch.utils import cpp_extension
    built_from = source.read_bytes() + " ".join(_compiler_flags()).encode() + _processor().encode()
    key = hashlib.sha256(built_from).hexdigest()[:12]
    root = Path(os.environ.get("TORCH_EXTENSIONS_DIR") or cpp_extension.get_default_build_root())
    return root / f"{name}-py{sys.version_info.major}{sys.version_info.minor}-torch{torch.__version__}-{key}"


def _load_built(library: Path, name: str, python_module: bool) -> None:
    if not python_module:
        torch.ops.load_library(str(library))
        return
    spec = importlib.util.spec_from_file_location(name, library)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sys.modules[name] = module


def load_native_library(source: Path, name: str, what: Text, python_module: bool = False) -> NativeProblem | None:
    """Load the operators of the C++ file ``source`` into ``torch.ops`` as the library ``name``, building it
    first when this machine has not; None when it worked, else why not. ``what`` names it in the one line
    printed while it builds. ``python_module``: the file is a Python module (pybind11) instead, which is then
    imported as ``name`` (``importlib.import_module(name)`` finds it): the native decode step
    (``engine/compiled_decode.py``)."""
    folder = _build_folder(source, name)
    library = folder / f"{name}.so"
    if library.exists():
        try:
            _load_built(library, name, python_module)  # built before: no compiler needed, no build lock taken
            return None
        except (OSError, ImportError):
            library.unlink()  # half written by a build that was killed: build it again
    compiler = os.environ.get("CXX", "c++")
    if shutil.which(compiler) is None:
        return NO_COMPILER, {"compiler": compiler}
    from torch.utils import cpp_extension
    folder.mkdir(parents=True, exist_ok=True)
    # The loader lets one process build while the others wait for its lock file to go. A process killed
    # while building leaves the file behind, and every later start would wait for ever: a build takes
    # seconds, so a lock older than STALE_LOCK_SECONDS has no builder left.
    lock = folder / "lock"
    if lock.exists() and time.time() - lock.stat().st_mtime > STALE_LOCK_SECONDS:
        lock.unlink(missing_ok=True)
    print(say(BUILDING, what=say(what), source=source.name), file=sys.stderr, flush=True)
    start = time.perf_counter()
    try:
        module = cpp_extension.load(name=name, sources=[str(source)], extra_cflags=_compiler_flags(),
                                    build_directory=str(folder), is_python_module=python_module, verbose=False)
    except (RuntimeError, OSError, ImportError) as exc:
        first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return BUILD_FAILED, {"source": source.name, "first_line": first_line}
    if python_module:
        sys.modules[name] = module
    print(say(BUILT, what=say(what), seconds=time.perf_counter() - start, folder=folder), file=sys.stderr, flush=True)
    return None


@functools.cache
def _load() -> NativeProblem | None:
    """Load the kernel, building it first when this machine has not; None when it worked, else why not.
    Once per process."""
    return load_native_library(SOURCE, EXTENSION_NAME, KERNEL)


def cpp_unusable_reason(device: torch.device, dtype: torch.dtype, head_dim: int | None = None,
                        heads: int | None = None) -> str | None:
    """Why the cpp backend cannot run here (None when it can), for a model with this ``head_dim`` and this
    many query ``heads`` when they are given. Builds the kernel on the first call that gets that
    far: that is the only way to know the compiler works."""
    if device.type != "cpu":
        return say(NOT_ON_CPU, device=device.type)
    if dtype != torch.float32:
        return say(NOT_FLOAT32, dtype=str(dtype).removeprefix("torch."))
    if head_dim is not None and head_dim > MAX_HEAD_DIM:
        return say(HEAD_DIM_TOO_LARGE, most=MAX_HEAD_DIM, head_dim=head_dim)
    if head_dim is not None and head_dim % WIDTH_MULTIPLE:
        return say(HEAD_DIM_NOT_MULTIPLE, multiple=WIDTH_MULTIPLE, head_dim=head_dim)
    if heads is not None and heads > MAX_HEADS:
        return say(TOO_MANY_HEADS, most=MAX_HEADS, heads=heads)
    return said(_load())


class CppAttentionBackend(TorchAttentionBackend):
    name = "cpp"

    def __init__(self) -> None:
        super().__init__()
        # Config.build refused attention_backend='cpp' where it cannot run, naming why.
        problem = said(_load())
        assert problem is None, f"attention_backend='cpp' cannot run: {problem}"
        self.kernel = torch.ops.nanovllm_teach_cpp.paged_decode_attention

    def decode(self, q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
               ctx: Context, scale: float) -> torch.Tensor:
        return self.kernel(q.contiguous(), k_cache, v_cache, ctx.block_tables, ctx.context_lens, scale)
