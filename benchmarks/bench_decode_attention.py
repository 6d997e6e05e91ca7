"""Decode attention alone: the cpp backend's C++ kernel (reads the paged cache in place) against the torch
backend (copies each group's rows out, then SDPA), on the same random paged cache, in this process.

For each shape (the shipped model's heads, and Qwen3-0.6B's: 16 query heads over 8 K/V heads of 128) a
batch of ``--batch`` sequences with contexts uniform in ``--min-len``..``--max-len`` gets blocks scattered
over a cache of ``--spare-blocks`` more blocks than it needs (as a block manager's are after a while). Each
backend's decode attention of one layer is timed (the fastest of ``--repeats`` runs of ``--calls`` calls),
and the kernel's result is checked against the torch backend's (whose per-step plan is built once, by the
first call, as in a step the first layer builds it for the others). Printed: milliseconds per layer, the ratio,
and the bytes of K/V that must be read (each cached row once) per second, against this machine's memory
bandwidth measured the way ``step_cost`` measures it.
"""

from __future__ import annotations

import argparse
import random
import time

import torch

from nanovllm_teach.layers.attention_cpp import CppAttentionBackend, cpp_unusable_reason
from nanovllm_teach.layers.attention_torch import TorchAttentionBackend
from nanovllm_teach.models import step_cost
from nanovllm_teach.utils.context import Context

SHAPES = {"shipped (4 heads / 2 KV heads x 64)": (4, 2, 64), "Qwen3-0.6B (16 / 8 x 128)": (16, 8, 128)}


def paged_batch(lens: list[int], block_size: int, kv_heads: int, head_dim: int, spare: int, seed: int):
    rng = random.Random(seed)
    needed = [-(-n // block_size) for n in lens]
    num_blocks = sum(needed) + spare
    k_cache = torch.randn(num_blocks, block_size, kv_heads, head_dim)
    v_cache = torch.randn(num_blocks, block_size, kv_heads, head_dim)
    ids = rng.sample(range(num_blocks), sum(needed))
    tables, start = [], 0
    for n in needed:
        tables.append(ids[start:start + n] + [-1] * (max(needed) - n))
        start += n
    ctx = Context(is_prefill=False, context_lens=torch.tensor(lens, dtype=torch.int32),
                  block_tables=torch.tensor(tables, dtype=torch.int32))
    return k_cache, v_cache, ctx


def best_ms(fn, calls: int, repeats: int) -> float:
    fn()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, (time.perf_counter() - start) / calls)
    return best * 1e3


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n\n")[0])
    ap.add_argument("--batch", type=int, default=48)
    ap.add_argument("--min-len", type=int, default=16)
    ap.add_argument("--max-len", type=int, default=384)
    ap.add_argument("--block-size", type=int, default=256)
    ap.add_argument("--spare-blocks", type=int, default=200)
    ap.add_argument("--calls", type=int, default=50)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's own choice)")
    args = ap.parse_args(argv)
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    problem = cpp_unusable_reason(torch.device("cpu"), torch.float32)
    if problem is not None:
        raise SystemExit(f"the C++ kernel cannot run here: {problem}")
    bandwidth = step_cost.memory_bandwidth_gbs()
    rng = random.Random(0)
    lens = [rng.randint(args.min_len, args.max_len) for _ in range(args.batch)]
    print(f"{args.batch} sequences, contexts {min(lens)}..{max(lens)} (mean {sum(lens) / len(lens):.0f}), "
          f"blocks of {args.block_size} scattered over a cache with {args.spare_blocks} spare; "
          f"{torch.get_num_threads()} threads; memory bandwidth {bandwidth:.1f} GB/s")
    torch_backend, cpp_backend = TorchAttentionBackend(), CppAttentionBackend()
    for name, (heads, kv_heads, head_dim) in SHAPES.items():
        k_cache, v_cache, ctx = paged_batch(lens, args.block_size, kv_heads, head_dim, args.spare_blocks, seed=1)
        q = torch.randn(args.batch, heads, head_dim)
        scale = head_dim ** -0.5
        torch.testing.assert_close(cpp_backend.decode(q, k_cache, v_cache, ctx, scale),
                                   torch_backend.decode(q, k_cache, v_cache, ctx, scale), atol=2e-6, rtol=1e-5)
        copy_ms = best_ms(lambda: torch_backend.decode(q, k_cache, v_cache, ctx, scale), args.calls, args.repeats)
        kernel_ms = best_ms(lambda: cpp_backend.decode(q, k_cache, v_cache, ctx, scale), args.calls, args.repeats)
        kv_bytes = 2 * sum(lens) * kv_heads * head_dim * 4
        print(f"{name:<36} torch (copy, SDPA) {copy_ms:6.3f} ms   cpp kernel {kernel_ms:6.3f} ms   "
              f"kernel / torch {kernel_ms / copy_ms:.2f}x   K/V read once: {kv_bytes / 1e6:5.1f} MB, "
              f"kernel at {kv_bytes / kernel_ms / 1e6:5.1f} GB/s ({100 * kv_bytes / kernel_ms / 1e6 / bandwidth:.0f}% "
              "of the bandwidth)")


if __name__ == "__main__":
    main()
