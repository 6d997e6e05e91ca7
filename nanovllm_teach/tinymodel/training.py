"""Batching and the training loop of the shipped tiny Qwen3: plain torch, AdamW, one process.

Not an engine layer: part of the tool that trained the checkpoint in
``nanovllm_teach/assets/qwen3-tiny`` (run by ``python -m nanovllm_teach.tinymodel.train``, which
seeds every random source before calling these). ``make_batches`` groups encoded conversations
into padded batches, ``learning_rate`` is the warmup + cosine schedule, and ``train_model`` runs
one optimizer step per batch with the loss on the assistant's tokens only.
"""

from __future__ import annotations

import math
import random
import time

import torch
from transformers import Qwen3ForCausalLM

from nanovllm_teach.tinymodel.config import TrainConfig


def make_batches(
    examples: list[tuple[list[int], int]], batch_size: int, pad_id: int, rng: random.Random
) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Group examples of similar length into right-padded (input_ids, labels) batches.

    Sorting a pool of examples by length before cutting it into batches wastes far fewer
    positions on padding than random batches would (conversations range from about 10 to 105
    tokens). Right padding needs no attention mask: with causal attention, real tokens never
    see the pads that come after them, and pads carry no loss.
    """
    # Four batches per pool: bigger pools pad less but make each batch nearly all one task
    # (length follows the task), and in trials such one-task batches learned more slowly.
    pool_size = batch_size * 4
    batches = []
    for start in range(0, len(examples), pool_size):
        pool = sorted(examples[start : start + pool_size], key=lambda e: len(e[0]))
        chunk = [pool[i : i + batch_size] for i in range(0, len(pool), batch_size)]
        rng.shuffle(chunk)
        batches.extend(chunk)
    tensors = []
    for batch in batches:
        width = max(len(ids) for ids, _ in batch)
        input_ids = torch.full((len(batch), width), pad_id, dtype=torch.long)
        labels = torch.full((len(batch), width), -100, dtype=torch.long)
        for row, (ids, answer_start) in enumerate(batch):
            input_ids[row, : len(ids)] = torch.tensor(ids)
            labels[row, answer_start : len(ids)] = torch.tensor(ids[answer_start:])
        tensors.append((input_ids, labels))
    return tensors


def learning_rate(step: int, cfg: TrainConfig) -> float:
    """Linear warmup, then cosine decay from ``peak_lr`` to ``min_lr``."""
    if step < cfg.warmup_steps:
        return cfg.peak_lr * (step + 1) / cfg.warmup_steps
    progress = (step - cfg.warmup_steps) / max(1, cfg.steps - cfg.warmup_steps)
    return cfg.min_lr + 0.5 * (cfg.peak_lr - cfg.min_lr) * (1 + math.cos(math.pi * progress))


def train_model(model: Qwen3ForCausalLM, batches: list[tuple[torch.Tensor, torch.Tensor]], cfg: TrainConfig) -> None:
    """Plain AdamW over the batches, one step each; prints the loss every 50 steps."""
    # The usual rule: decay matrices, not norms (weights of RMSNorm are 1-D).
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": cfg.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
        lr=cfg.peak_lr,
        betas=(0.9, 0.95),
    )
    model.train()
    start = time.perf_counter()
    running = 0.0
    for step, (input_ids, labels) in enumerate(batches):
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(step, cfg)
        loss = model(input_ids=input_ids, labels=labels).loss
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
        optimizer.step()
        running += loss.item()
        if (step + 1) % 50 == 0:
            elapsed = time.perf_counter() - start
            print(f"step {step + 1:5d}/{len(batches)}  loss {running / 50:.4f}  {elapsed:6.0f}s", flush=True)
            running = 0.0
    model.eval()
