"""The opt-in compiled decode step gives the eager step's greedy tokens, writes the KV cache in place, and
compiles once for every batch size and context length; ``LLM(compile=True)`` compiles it at start-up,
reports it (DECODE_COMPILE) and runs every decode step through it."""

from __future__ import annotations

import random

import pytest
import torch
from transformers import AutoConfig

import nanovllm_teach
from nanovllm_teach.layers.attention import Attention, make_attention_backend
from nanovllm_teach.models.qwen3 import Qwen3ForCausalLM
from nanovllm_teach.engine.compiled_decode import CompiledDecode
from nanovllm_teach.utils.context import Context, reset_context, set_context
from nanovllm_teach.models.loader import load_model

BLOCK = 16


def _generate(model, prompts: list[list[int]], steps: int, decode) -> tuple[list[list[int]], torch.Tensor]:
    """Greedy tokens: prefill eagerly, then ``steps`` decode steps through ``decode(ids, positions)``.
    Sequence i owns consecutive blocks; from the third on, sequence i stops after ``steps - 3 i`` tokens, so
    the batch shrinks (to 2: a batch of 1 is a shape of its own for the compiler, compiled a second time)."""
    layers = [m for m in model.modules() if isinstance(m, Attention)]
    need = [-(-(len(p) + steps) // BLOCK) for p in prompts]
    cache = torch.zeros(2, len(layers), sum(need), BLOCK, layers[0].num_kv_heads, layers[0].head_dim)
    for i, layer in enumerate(layers):
        layer.k_cache, layer.v_cache = cache[0, i], cache[1, i]
    tables, first = [], 0
    for n in need:
        tables.append(list(range(first, first + n)))
        first += n

    def slot(i: int, pos: int) -> int:
        return tables[i][pos // BLOCK] * BLOCK + pos % BLOCK

    tokens = [list(p) for p in prompts]
    with torch.inference_mode():
        cu = torch.tensor([0] + [sum(map(len, prompts[:i + 1])) for i in range(len(prompts))], dtype=torch.int32)
        set_context(Context(is_prefill=True, cu_seqlens_q=cu, cu_seqlens_k=cu,
                            slot_mapping=torch.tensor([slot(i, p) for i, s in enumerate(prompts)
                                                       for p in range(len(s))])))
        hidden = model(torch.tensor([t for s in prompts for t in s]),
                       torch.tensor([p for s in prompts for p in range(len(s))]))
        reset_context()
        for i, t in enumerate(model.compute_logits(hidden[cu[1:].long() - 1]).argmax(-1).tolist()):
            tokens[i].append(t)
        for step in range(1, steps):
            live = [i for i in range(len(prompts)) if i < 2 or step < steps - 3 * i]
            ctx = Context(is_prefill=False, slot_mapping=torch.tensor([slot(i, len(tokens[i]) - 1) for i in live]),
                          context_lens=torch.tensor([len(tokens[i]) for i in live], dtype=torch.int32),
                          block_tables=torch.tensor([tables[i] + [-1] * (max(need) - len(tables[i]))
                                                     for i in live], dtype=torch.int32))
            set_context(ctx)
            hidden = decode(torch.tensor([tokens[i][-1] for i in live]),
                            torch.tensor([len(tokens[i]) - 1 for i in live]))
            reset_context()
            for i, t in zip(live, model.compute_logits(hidden).argmax(-1).tolist()):
                tokens[i].append(t)
    return [t[len(p):] for t, p in zip(tokens, prompts)], cache


@pytest.mark.parametrize("backend", ["torch", "cpp"])
def test_compiled_decode_tokens_equal_eager(backend):
    torch._dynamo.reset()
    path = nanovllm_teach.default_model_path()
    model = Qwen3ForCausalLM(AutoConfig.from_pretrained(path)).float().eval()
    load_model(model, path)
    for layer in model.modules():
        if isinstance(layer, Attention):
            layer.backend = make_attention_backend(backend)
    rng = random.Random(0)
    prompts = [[rng.randrange(640) for _ in range(rng.randint(3, 40))] for _ in range(6)]
    eager, eager_cache = _generate(model, prompts, 24, model)
    compiled = CompiledDecode(model)
    graphs = torch._dynamo.utils.counters["stats"]
    before = graphs["unique_graphs"]
    ours, ours_cache = _generate(model, prompts, 24, compiled)
    assert ours == eager
    # The cache was written in place, row for row as the eager step writes it.
    torch.testing.assert_close(ours_cache, eager_cache, rtol=1e-5, atol=1e-5)
    assert compiled.compile_seconds is not None and compiled.compile_seconds > 0
    # One graph for batch sizes 6 down to 2 and every context length (a recompile would add a second).
    assert graphs["unique_graphs"] - before == 1


def test_llm_with_compile_gives_eager_tokens_and_reports_its_compile():
    """``LLM(compile=True)``: compiled once at start-up (DECODE_COMPILE), then every decode step runs the
    compiled step, batch sizes 3, 2 and 1 included, with no recompiling, and the greedy tokens are eager's."""
    from nanovllm_teach import LLM, SamplingParams
    from nanovllm_teach.trace import TraceRecorder

    torch._dynamo.reset()
    prompts = [[5, 6, 7, 8, 9], list(range(10, 40)), list(range(40, 60))]
    params = [SamplingParams(temperature=0.0, max_tokens=n, ignore_eos=True) for n in (12, 8, 4)]
    eager = [out["token_ids"] for out in LLM().generate(prompts, params, use_tqdm=False)]
    rec = TraceRecorder(validate=True)
    graphs = torch._dynamo.utils.counters["stats"]
    before = graphs["unique_graphs"]
    llm = LLM(compile=True, trace=rec)
    assert graphs["unique_graphs"] - before == 2  # at start-up: batches of 2 and more, and the batch of 1
    assert [out["token_ids"] for out in llm.generate(prompts, params, use_tqdm=False)] == eager
    assert graphs["unique_graphs"] - before == 2  # nothing recompiled while serving
    compiles = [e for e in rec.events if e.event == "DECODE_COMPILE"]
    assert len(compiles) == 1 and compiles[0].stats["batch_sizes"] == [2, 1] and compiles[0].stats["seconds"] > 0
    runs = [e.stats for e in rec.events if e.event == "RUN_MODEL"]
    assert {(s["mode"], s["eager_reason"]) for s in runs} == {("eager", "prefill"), ("compiled", "no_cuda")}
    assert {s["batch_size"] for s in runs if s["mode"] == "compiled"} == {3, 2, 1}


def test_compile_is_refused_with_tensor_parallelism():
    from nanovllm_teach import LLM

    with pytest.raises(ValueError, match=r"compile=True runs on one rank only, not with tensor_parallel_size=2"):
        LLM(compile=True, tensor_parallel_size=2)
