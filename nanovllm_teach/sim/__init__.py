"""The engine at scale, simulated: the real scheduler and block manager driving a model runner that
computes no tensors and predicts each step's time on a device that is not there.

- ``hardware``: devices as data (datasheet peaks with their sources) and this CPU, measured;
- ``cost_model``: model shapes (``shapes/``: the public ``config.json`` of six Qwen3 sizes) and the
  per-step roofline;
- ``runner``: ``SimulatedRunner``, the model runner's interface on the cost model and a simulated clock;
- ``engine``: the simulated engine's parts (``LLM(..., runner="simulated")``): the same ``LLMEngine``,
  which imports nothing from here;
- ``cli``: ``nanovllm-teach simulate``.

The workloads it serves, and what serving them measures, are ``nanovllm_teach.workload``'s: the real engine
serves the same ones.
"""
