"""The engine, in three layers with hard edges, and the shell around them.

- orchestration: ``LLMEngine`` (the step loop, single-threaded), ``Teaching`` (what was decided and done, as
  TEACHING events) and ``transaction`` (checkpoint, rollback, abort);
- resources: ``Scheduler``, ``BlockManager``, ``Sequence`` (pure Python: who runs, which KV blocks), which
  return what they decided as records (``decisions``);
- execution: ``ModelRunner`` (tensors, the model, the sampler), behind the ``Runner`` protocol (``runner``),
  which returns what it did.

Around them, the shell a product needs (``frontend``: validation, ``n > 1``, threads, the serving frame),
which ``nanovllm_teach.LLM`` is.
"""
