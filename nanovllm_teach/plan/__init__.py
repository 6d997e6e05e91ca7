"""The deployment planner (``nanovllm-teach plan``, ``cli/plan.py``): which GPU, tensor-parallel degree, replica
count and batch limits serve a workload at a target rate within a latency SLO, at the lowest cost, searched on
the simulated engine (``LLM(..., runner="simulated")``). Orchestration, above the engine it drives:

- ``probes``: the pieces of one configuration's search: candidates, workload, SLO, one probe, the memory fit,
  the watch that stops a probe once it cannot pass;
- ``rates``: the search over rates (the next probe's rate, the rate sustained), a pure function of the probes;
- ``recorded``: a trace's finished requests as the workload (``plan --workload-trace``);
- ``search``: every candidate's search, in this process or on Ray, logged to resume;
- ``results``: the rows (candidate x replicas), their costs (``sim/prices.py``), the cheapest, JSON and CSV;
- ``messages``: the errors a user reads, in English and Chinese.
"""
