"""The engine at scale, simulated: the real scheduler and block manager driving a model runner that
computes no tensors and predicts each step's time on a device that is not there.

- ``hardware``: devices as data (datasheet peaks with their sources) and this CPU, measured;
- ``cost_model``: model shapes (``shapes/``: the public ``config.json`` of six Qwen3 sizes) and the
  per-step roofline;
- ``runner``: ``SimulatedRunner``, the model runner's interface on the cost model and a simulated clock;
- ``workload``: arrivals in seconds and length distributions;
- ``metrics``: what a workload run measures (``LLMEngine.run_workload``): TTFT, TPOT, throughput;
- ``cli``: ``nanovllm-teach simulate``.
"""
