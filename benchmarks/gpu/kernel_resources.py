"""Registers and local-memory spills of the Triton kernels compiled for a GPU, on a machine without one.

Triton compiles for any target without a device (its wheel brings ``ptxas`` and ``cuobjdump``): this
compiles every kernel variant the engine launches (prefill flat and paged, decode, store; bf16 and fp32;
head_dim 128, Qwen3's) for sm_90 (H100/H200) and prints what ``cuobjdump --dump-resource-usage`` says.
A kernel that needs more than 255 registers per thread spills to local memory (``STACK`` > 0), which is
slow. Run with ``TRITON_INTERPRET`` unset::

    python benchmarks/gpu/kernel_resources.py            # at the warps the engine launches
    python benchmarks/gpu/kernel_resources.py --prefill-warps 4
"""

from __future__ import annotations

import argparse
import importlib
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

os.environ.pop("TRITON_INTERPRET", None)  # compiled kernels, not interpreted ones
os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")

import triton  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
paged = importlib.import_module("nanovllm_teach.kernels.paged_attention")
store = importlib.import_module("nanovllm_teach.kernels.store_kvcache")

CUOBJDUMP = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
HEAD_DIM = 128


@dataclass(frozen=True)
class Usage:
    kernel: str
    registers: int
    stack_bytes: int


def _signature(fn, dtype: str, constexprs: dict, int_pointers: dict[str, str], floats: set[str]) -> dict[str, str]:
    sig = {}
    for name in fn.arg_names:
        if name in constexprs:
            sig[name] = "constexpr"
        elif name in int_pointers:
            sig[name] = int_pointers[name]
        elif name.endswith("_ptr"):
            sig[name] = "*" + dtype
        else:
            sig[name] = "fp32" if name in floats else "i32"
    return sig


def compile_usage(label: str, fn, dtype: str, constexprs: dict, int_pointers: dict[str, str],
                  num_warps: int, arch: int = 90) -> Usage:
    signature = _signature(fn, dtype, constexprs, int_pointers, {"scale"})
    source = ASTSource(fn=fn, signature=signature,
                       constexprs={(fn.arg_names.index(k),): v for k, v in constexprs.items()})
    compiled = triton.compile(source, target=GPUTarget("cuda", arch, 32), options={"num_warps": num_warps})
    with tempfile.NamedTemporaryFile(suffix=".cubin") as cubin:
        cubin.write(compiled.asm["cubin"])
        cubin.flush()
        text = subprocess.run([str(CUOBJDUMP), "--dump-resource-usage", cubin.name], check=True,
                              capture_output=True, text=True).stdout
    found = re.search(r"REG:(\d+).*?STACK:(\d+)", text, re.S)
    return Usage(label, int(found.group(1)), int(found.group(2)))


def all_usages(prefill_warps: int = paged.PREFILL_NUM_WARPS) -> list[Usage]:
    usages = []
    for dtype, block in (("bf16", 64), ("fp32", 32)):
        for is_paged in (False, True):
            consts = dict(PAGED=is_paged, HEAD_DIM=HEAD_DIM, BLOCK_D=HEAD_DIM, BLOCK_M=block, BLOCK_N=block,
                          DOT_PRECISION="ieee" if dtype == "fp32" else "tf32")
            usages.append(compile_usage(
                f"prefill {dtype} {'paged' if is_paged else 'flat'} ({prefill_warps} warps)", paged._prefill_kernel,
                dtype, consts, dict(cu_seqlens_q_ptr="*i32", cu_seqlens_k_ptr="*i32", block_tables_ptr="*i32"),
                prefill_warps))
        usages.append(compile_usage(
            f"decode {dtype}", paged._paged_decode_kernel, dtype,
            dict(HEAD_DIM=HEAD_DIM, BLOCK_D=HEAD_DIM, BLOCK_N=paged.DECODE_BLOCK_N),
            dict(block_tables_ptr="*i32", context_lens_ptr="*i32"), 4))
        usages.append(compile_usage(f"store {dtype}", store._store_kvcache_kernel, dtype,
                                    dict(BLOCK_H=8, BLOCK_D=HEAD_DIM), dict(slot_mapping_ptr="*i64"), 4))
    return usages


def main() -> int:
    ap = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n\n")[0])
    ap.add_argument("--prefill-warps", type=int, default=paged.PREFILL_NUM_WARPS)
    args = ap.parse_args()
    print(f"triton {triton.__version__}, sm_90, head_dim {HEAD_DIM}")
    for usage in all_usages(args.prefill_warps):
        print(f"{usage.kernel:<32} {usage.registers:>4} registers  {usage.stack_bytes:>5} bytes of stack (spills)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
