"""One engine of ``bench_peers.py``, in a process (and virtual environment) of its own.

``python peer_worker.py ENGINE --model PATH --threads default|1`` builds one engine at its own default
settings, warms it up on one short request, and says so (with its start-up seconds and version) on the
protocol stream. Then it reads one JSON request per line on stdin -- ``{"prompts": [[ids]], "max_tokens":
[n]}`` -- and answers each with ``{"wall": seconds, "tokens": [[ids]]}``: greedy decoding, ``ignore_eos``,
every request submitted at once (llama-cpp-python's ``Llama`` serves one sequence at a time, so it runs
them one after another, each with its KV cache cleared). ``{"cost": [context lengths]}`` (our engine only)
answers the FLOPs and minimum bytes of one decode step at those context lengths. An empty line ends it.

ENGINE is ``ours`` (this project), ``hf`` (``transformers`` ``generate`` on static padded batches of
``--hf-batch``), ``vllm`` (vLLM's CPU build) or ``llama`` (llama-cpp-python, with ``--gguf``). Only the
standard library is imported here before the engine is chosen, so that each peer's environment needs
nothing of ours. The protocol stream is the process's original stdout; everything the libraries print goes
to stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from time import perf_counter
from typing import Callable

Generate = Callable[[list[list[int]], list[int]], list[list[int]]]


def build_ours(args: argparse.Namespace) -> tuple[Generate, str, dict]:
    from nanovllm_teach import LLM, SamplingParams, __version__  # before torch: its OpenMP wait policy
    import torch

    from nanovllm_teach.models import step_cost

    llm = LLM(args.model, **({} if args.threads == "default" else {"cpu_threads": 1}))

    def generate(prompts: list[list[int]], max_tokens: list[int]) -> list[list[int]]:
        params = [SamplingParams(temperature=0.0, max_tokens=n, ignore_eos=True) for n in max_tokens]
        return [out["token_ids"] for out in llm.generate(prompts, params, use_tqdm=False)]

    def cost(lens: list[int]) -> dict:
        model = llm.model_runner.model
        return {"flops": step_cost.decode_flops(model, lens), "bytes": step_cost.decode_bytes(model, lens)}

    generate.cost = cost  # type: ignore[attr-defined]
    return generate, f"nanovllm_teach {__version__}, torch {torch.__version__}", {"threads": torch.get_num_threads()}


def build_hf(args: argparse.Namespace) -> tuple[Generate, str, dict]:
    import torch
    import transformers
    from transformers import AutoModelForCausalLM, GenerationConfig

    if args.threads == "1":
        torch.set_num_threads(1)
    transformers.logging.set_verbosity_error()
    model = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.float32).eval()
    pad = 0

    @torch.inference_mode()
    def generate(prompts: list[list[int]], max_tokens: list[int]) -> list[list[int]]:
        outputs: list[list[int]] = []
        for first in range(0, len(prompts), args.hf_batch):  # arrival order; a batch runs to its longest
            batch, wants = prompts[first:first + args.hf_batch], max_tokens[first:first + args.hf_batch]
            width = max(map(len, batch))
            ids = torch.tensor([[pad] * (width - len(p)) + p for p in batch])
            mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in batch])
            out = model.generate(input_ids=ids, attention_mask=mask, generation_config=GenerationConfig(
                do_sample=False, max_new_tokens=max(wants), eos_token_id=-1, pad_token_id=pad))
            outputs.extend(row[:n] for row, n in zip(out[:, width:].tolist(), wants))
        return outputs

    return generate, f"transformers {transformers.__version__}, torch {torch.__version__}", \
        {"threads": torch.get_num_threads()}


def build_vllm(args: argparse.Namespace) -> tuple[Generate, str, dict]:
    if args.threads == "1":
        os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", "0")  # one core: vLLM's CPU build binds its threads
    import vllm
    from vllm import LLM, SamplingParams
    from vllm.inputs import TokensPrompt

    # max_model_len: otherwise vLLM reserves room for one request of the checkpoint's whole context (40,960
    # positions for a Qwen3-0.6B shape: 8.75 GiB of KV cache) and refuses to start in a share of this machine.
    llm = LLM(args.model, dtype="float32", gpu_memory_utilization=args.vllm_memory, skip_tokenizer_init=False,
              max_model_len=args.context)

    def generate(prompts: list[list[int]], max_tokens: list[int]) -> list[list[int]]:
        params = [SamplingParams(temperature=0.0, max_tokens=n, ignore_eos=True) for n in max_tokens]
        outs = llm.generate([TokensPrompt(prompt_token_ids=p) for p in prompts], params, use_tqdm=False)
        return [list(o.outputs[0].token_ids) for o in outs]

    return generate, f"vllm {vllm.__version__}", {"env": {k: v for k, v in os.environ.items()
                                                           if k.startswith("VLLM_CPU")}}


def build_llama(args: argparse.Namespace) -> tuple[Generate, str, dict]:
    import llama_cpp

    threads = {} if args.threads == "default" else {"n_threads": 1, "n_threads_batch": 1}
    llm = llama_cpp.Llama(args.gguf, verbose=False, n_ctx=args.context, **threads)

    def generate(prompts: list[list[int]], max_tokens: list[int]) -> list[list[int]]:
        outputs = []
        for prompt, n in zip(prompts, max_tokens):
            llm.reset()
            tokens: list[int] = []
            # top_k=1 is greedy; generate() never stops at the end-of-sequence token by itself.
            for token in llm.generate(prompt, top_k=1, temp=0.0, repeat_penalty=1.0, reset=True):
                tokens.append(token)
                if len(tokens) == n:
                    break
            outputs.append(tokens)
        return outputs

    return generate, f"llama-cpp-python {llama_cpp.__version__}", \
        {"threads": llm.context_params.n_threads, "n_ctx": llm.n_ctx()}


BUILDERS = {"ours": build_ours, "hf": build_hf, "vllm": build_vllm, "llama": build_llama}


def main() -> None:
    ap = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n\n")[0])
    ap.add_argument("engine", choices=sorted(BUILDERS))
    ap.add_argument("--model", required=True)
    ap.add_argument("--threads", choices=("default", "1"), default="default")
    ap.add_argument("--gguf", help="llama: the model converted to GGUF")
    ap.add_argument("--hf-batch", type=int, default=16)
    ap.add_argument("--vllm-memory", type=float, default=0.5, help="vllm: gpu_memory_utilization")
    ap.add_argument("--context", type=int, default=512,
                    help="llama: n_ctx (its default is 512); vllm: max_model_len (positions one request may use)")
    args = ap.parse_args()

    protocol = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # whatever the libraries print (and their child processes) goes to stderr

    def send(message: dict) -> None:
        protocol.write(json.dumps(message) + "\n")
        protocol.flush()

    start = perf_counter()
    generate, version, info = BUILDERS[args.engine](args)
    built = perf_counter() - start
    generate([[1, 2, 3, 4]], [4])
    send({"ready": True, "version": version, "build_s": built, "start_s": perf_counter() - start, "info": info})
    for line in sys.stdin:
        if not line.strip():
            break
        request = json.loads(line)
        if "cost" in request:
            send(generate.cost(request["cost"]))  # type: ignore[attr-defined]
            continue
        start = perf_counter()
        tokens = generate(request["prompts"], request["max_tokens"])
        send({"wall": perf_counter() - start, "tokens": tokens})


if __name__ == "__main__":
    main()
