"""Execution layer: the building blocks of Qwen3 (linear layers that shard for tensor parallelism, norms,
rotary embedding, attention with its KV-cache backends, the sampler)."""
