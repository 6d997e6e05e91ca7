"""The engine, in three layers with hard edges.

- orchestration: ``LLMEngine`` (prompts in, the step loop, outputs out);
- resources: ``Scheduler``, ``BlockManager``, ``Sequence`` (pure Python: who runs, which KV blocks);
- execution: ``ModelRunner`` (tensors, the model, the sampler).
"""
