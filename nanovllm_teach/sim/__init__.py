"""The engine at scale, simulated: the real scheduler and block manager driving a model runner that
computes no tensors and predicts each step's time on a device that is not there.

- ``hardware``: devices as data (datasheet peaks, 16-bit and FP8, with their sources) and this CPU, measured;
- ``cost_model``: model shapes (from any dense decoder's ``config.json``: Qwen3, Qwen2/2.5, Llama 2/3, Mistral;
  ``shapes/`` ships the public ones of six Qwen3 sizes, Llama-3.1-8B and -70B and Qwen2.5-7B) and the per-step
  roofline;
- ``efficiency``: the named factors by which a real engine falls short of the datasheet, and each device's
  (fitted on published measurements, this CPU's calibration, or the defaults);
- ``budget``: what a run will hold, on the device and on this machine, estimated before it starts;
- ``runner``: ``SimulatedRunner``, the model runner's interface on the cost model and a simulated clock;
- ``engine``: the simulated engine's parts (``LLM(..., runner="simulated")``): the same ``LLMEngine``,
  which imports nothing from here;
- ``calibrate``: the efficiency factors fitted to a real engine's measured steps on a CPU;
- ``published``: published serving measurements of real engines, as checked data (``published.json``), and how
  many of them each GPU's factors were fitted on (fewer than two: the GPU is reported unfitted);
- ``prices``: public on-demand prices per GPU-hour, each with its page and date (``prices.json``), for the
  deployment planner (``nanovllm_teach/plan/``, ``nanovllm-teach plan``);
- ``messages``: the errors a user reads, in English and Chinese.

The ``simulate`` command is ``nanovllm_teach/cli/simulate.py``; ``benchmarks/bench_sim_published.py`` runs
the published cases through the simulated engine.

The workloads it serves, and what serving them measures, are ``nanovllm_teach.workload``'s: the real engine
serves the same ones.
"""
