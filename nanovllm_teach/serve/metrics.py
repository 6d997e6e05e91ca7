"""Serving: the server's Prometheus metrics, under vLLM's names, through ``prometheus_client``.

Each server has its own ``CollectorRegistry`` (two servers in one process, as in the tests, count apart).
Every series carries vLLM's ``model_name`` label. The engine thread (``serve/engine_thread.py``) updates
them; ``/metrics`` renders them with ``generate_latest``.

- gauges: ``vllm:num_requests_running``, ``vllm:num_requests_waiting``, ``vllm:gpu_cache_usage_perc`` (the
  fraction of KV blocks in use, 0..1, on a CPU too: vLLM's name, kept for the dashboards that read it);
- histograms (seconds): ``vllm:time_to_first_token_seconds`` (arrival to the end of the step that made the
  first token), ``vllm:time_per_output_token_seconds`` (each later token, on average per request),
  ``vllm:e2e_request_latency_seconds``, ``vllm:request_queue_time_seconds`` (arrival to the start of the first
  step that scheduled it); ``vllm:iteration_tokens_total``: tokens computed per engine step;
- counters: ``vllm:request_success`` (by vLLM's ``finished_reason``: stop or length), ``vllm:prompt_tokens``,
  ``vllm:generation_tokens`` (``_total`` appended, as vLLM's are), and ``nanovllm:requests_aborted``.

Emits no events.
"""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from nanovllm_teach.outputs import API_FINISH_REASONS
from nanovllm_teach.workload.metrics import RequestTimes

# vLLM's bucket bounds for these histograms (seconds; tokens for the iteration histogram).
TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0)
TPOT_BUCKETS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5)
LATENCY_BUCKETS = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0)
ITERATION_BUCKETS = (1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192)


class ServerMetrics:
    def __init__(self, model_name: str) -> None:
        self.registry = CollectorRegistry()
        labels = ["model_name"]
        r = self.registry

        def gauge(name: str, doc: str) -> Any:
            return Gauge(name, doc, labels, registry=r).labels(model_name)

        def histogram(name: str, doc: str, buckets: tuple) -> Any:
            return Histogram(name, doc, labels, buckets=buckets, registry=r).labels(model_name)

        self.running = gauge("vllm:num_requests_running", "Number of requests in the running batch.")
        self.waiting = gauge("vllm:num_requests_waiting", "Number of requests waiting to be scheduled.")
        self.cache_usage = gauge("vllm:gpu_cache_usage_perc", "KV-cache usage: 1 means every block is in use.")
        self.ttft = histogram("vllm:time_to_first_token_seconds", "Time to first token in seconds.", TTFT_BUCKETS)
        self.tpot = histogram("vllm:time_per_output_token_seconds", "Time per output token in seconds.", TPOT_BUCKETS)
        self.e2e = histogram("vllm:e2e_request_latency_seconds", "End-to-end request latency in seconds.",
                             LATENCY_BUCKETS)
        self.queue = histogram("vllm:request_queue_time_seconds", "Time spent waiting before the first step.",
                               LATENCY_BUCKETS)
        self.iteration = histogram("vllm:iteration_tokens_total", "Tokens computed per engine step.",
                                   ITERATION_BUCKETS)
        self.success = Counter("vllm:request_success", "Requests that finished.", labels + ["finished_reason"],
                               registry=r)
        self.model_name = model_name
        self.prompt_tokens = Counter("vllm:prompt_tokens", "Prompt tokens of finished requests.", labels,
                                     registry=r).labels(model_name)
        self.generation_tokens = Counter("vllm:generation_tokens", "Generated tokens of finished requests.",
                                         labels, registry=r).labels(model_name)
        self.aborts = Counter("nanovllm:requests_aborted", "Requests aborted (a client that left).", labels,
                              registry=r).labels(model_name)

    # ---- called by the engine thread --------------------------------------------------------------

    def stepped(self, engine: Any, num_batched_tokens: int | None) -> None:
        """After a step (``num_batched_tokens``: what it computed; None for an abort outside a step)."""
        scheduler = engine.scheduler
        bm = scheduler.block_manager
        self.running.set(len(scheduler.running))
        self.waiting.set(len(scheduler.waiting))
        self.cache_usage.set((bm.num_blocks - bm.num_free_blocks) / bm.num_blocks)
        if num_batched_tokens is not None:
            self.iteration.observe(num_batched_tokens)

    def queued(self, seconds: float) -> None:
        self.queue.observe(max(0.0, seconds))

    def first_token(self, ttft_s: float | None) -> None:
        if ttft_s is not None:
            self.ttft.observe(ttft_s)

    def finished(self, times: RequestTimes) -> None:
        self.success.labels(self.model_name, API_FINISH_REASONS.get(times.finish_reason, "stop")).inc()
        self.prompt_tokens.inc(times.num_prompt_tokens)
        self.generation_tokens.inc(times.num_output_tokens)
        if times.tpot_s is not None:
            self.tpot.observe(times.tpot_s)
        if times.finish_s is not None:
            self.e2e.observe(times.finish_s - times.arrival_s)

    def aborted(self) -> None:
        self.aborts.inc()

    def render(self) -> bytes:
        return generate_latest(self.registry)
