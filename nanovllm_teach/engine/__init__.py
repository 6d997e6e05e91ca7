"""The engine, in three layers with hard edges.

- orchestration: ``LLMEngine`` (prompts in, the step loop, outputs out) and ``Teaching`` (the decisions as
  TEACHING events);
- resources: ``Scheduler``, ``BlockManager``, ``Sequence`` (pure Python: who runs, which KV blocks), which
  return what they decided as records (``decisions``), and ``transaction`` (checkpoint, rollback, abort);
- execution: ``ModelRunner`` (tensors, the model, the sampler), behind the ``Runner`` protocol (``runner``).
"""
