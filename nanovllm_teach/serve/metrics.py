"""Serving: the server's Prometheus metrics, under the names, types and labels of vLLM v1's
``PrometheusStatLogger`` (``vllm/v1/metrics/loggers.py``), through ``prometheus_client``.

``VLLM_METRICS`` is the list, each name with its type; the tests check ``/metrics`` against it, so a
dashboard built for today's vLLM finds every panel's series here. Every series carries vLLM's
``model_name`` and ``engine`` labels (one engine: ``"0"``). Not exported: what vLLM names and this engine
has no counterpart for (speculative decoding, LoRA, the KV connector), and the names vLLM v1 dropped
(``gpu_cache_usage_perc``, now ``kv_cache_usage_perc``; ``time_per_output_token_seconds``, now
``inter_token_latency_seconds`` per token and ``request_time_per_output_token_seconds`` per request).
One series of our own: ``nanovllm:requests_aborted`` (clients that left).

Each server has its own ``CollectorRegistry`` (two servers in one process, as in the tests, count apart),
and a bounded number of series (fixed labels; ``finished_reason`` takes vLLM's few values): the metrics
cost the same memory after a million requests as after one. They are updated in the API process with
the numbers the engine core sends after each step (``serve/core_client.py``); ``/metrics`` renders them
with ``generate_latest``.

Emits no events.
"""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from nanovllm_teach.outputs import API_FINISH_REASONS
from nanovllm_teach.serve.messages import Finished, StepStats
from nanovllm_teach.workload.metrics import RequestTimes

# vLLM's bucket bounds (seconds; tokens for the token histograms, which build_1_2_5_buckets sizes).
TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
                40.0, 80.0, 160.0, 640.0, 2560.0)
PER_TOKEN_BUCKETS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
                     40.0, 80.0)
LATENCY_BUCKETS = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0,
                   480.0, 960.0, 1920.0, 7680.0)
ITERATION_BUCKETS = (1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)
N_BUCKETS = (1, 2, 5, 10, 20)

# vLLM v1's series (as Prometheus names them: a counter's samples end in ``_total``).
VLLM_METRICS: dict[str, str] = {
    "vllm:num_requests_running": "gauge", "vllm:num_requests_waiting": "gauge", "vllm:kv_cache_usage_perc": "gauge",
    "vllm:prefix_cache_queries": "counter", "vllm:prefix_cache_hits": "counter", "vllm:num_preemptions": "counter",
    "vllm:prompt_tokens": "counter", "vllm:generation_tokens": "counter", "vllm:request_success": "counter",
    "vllm:request_prompt_tokens": "histogram", "vllm:request_generation_tokens": "histogram",
    "vllm:iteration_tokens_total": "histogram", "vllm:request_max_num_generation_tokens": "histogram",
    "vllm:request_params_n": "histogram", "vllm:request_params_max_tokens": "histogram",
    "vllm:time_to_first_token_seconds": "histogram", "vllm:inter_token_latency_seconds": "histogram",
    "vllm:request_time_per_output_token_seconds": "histogram", "vllm:e2e_request_latency_seconds": "histogram",
    "vllm:request_queue_time_seconds": "histogram", "vllm:request_inference_time_seconds": "histogram",
    "vllm:request_prefill_time_seconds": "histogram", "vllm:request_decode_time_seconds": "histogram",
}
VLLM_LABELS = ("model_name", "engine")
ENGINE_INDEX = "0"  # one engine core


def build_1_2_5_buckets(max_value: int) -> tuple[int, ...]:
    """1, 2, 5, 10, 20, 50, ... up to ``max_value``: vLLM's buckets for token counts."""
    buckets, scale = [], 1
    while True:
        for mantissa in (1, 2, 5):
            if mantissa * scale > max_value:
                return tuple(buckets)
            buckets.append(mantissa * scale)
        scale *= 10


class ServerMetrics:
    def __init__(self, model_name: str, max_model_len: int) -> None:
        self.registry = CollectorRegistry()
        self.model_name = model_name
        labels = list(VLLM_LABELS)
        documented: dict[str, str] = {}
        tokens = build_1_2_5_buckets(max_model_len)

        def make(name: str, doc: str, buckets: tuple = ()) -> Any:
            kind = VLLM_METRICS[name]
            documented[name] = kind
            if kind == "histogram":
                return Histogram(name, doc, labels, buckets=buckets, registry=self.registry).labels(
                    model_name, ENGINE_INDEX)
            made = (Gauge if kind == "gauge" else Counter)(name, doc, labels, registry=self.registry)
            return made.labels(model_name, ENGINE_INDEX)

        self.running = make("vllm:num_requests_running", "Number of requests in model execution batches.")
        self.waiting = make("vllm:num_requests_waiting", "Number of requests waiting to be processed.")
        self.kv_cache_usage = make("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.")
        self.prefix_queries = make("vllm:prefix_cache_queries",
                                   "Prefix cache queries, in terms of number of queried tokens.")
        self.prefix_hits = make("vllm:prefix_cache_hits", "Prefix cache hits, in terms of number of cached tokens.")
        self.preemptions = make("vllm:num_preemptions", "Cumulative number of preemption from the engine.")
        self.prompt_tokens = make("vllm:prompt_tokens", "Number of prefill tokens processed.")
        self.generation_tokens = make("vllm:generation_tokens", "Number of generation tokens processed.")
        documented["vllm:request_success"] = "counter"
        self.success = Counter("vllm:request_success", "Count of successfully processed requests.",
                               labels + ["finished_reason"], registry=self.registry)
        self.request_prompt_tokens = make("vllm:request_prompt_tokens", "Number of prefill tokens processed.", tokens)
        self.request_generation_tokens = make("vllm:request_generation_tokens",
                                              "Number of generation tokens processed.", tokens)
        self.iteration = make("vllm:iteration_tokens_total", "Histogram of number of tokens per engine_step.",
                              ITERATION_BUCKETS)
        self.max_num_generation_tokens = make("vllm:request_max_num_generation_tokens",
                                              "Histogram of maximum number of requested generation tokens.", tokens)
        self.params_n = make("vllm:request_params_n", "Histogram of the n request parameter.", N_BUCKETS)
        self.params_max_tokens = make("vllm:request_params_max_tokens",
                                      "Histogram of the max_tokens request parameter.", tokens)
        self.ttft = make("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.",
                         TTFT_BUCKETS)
        self.itl = make("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.",
                        PER_TOKEN_BUCKETS)
        self.tpot = make("vllm:request_time_per_output_token_seconds",
                         "Histogram of time_per_output_token_seconds per request.", PER_TOKEN_BUCKETS)
        self.e2e = make("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.",
                        LATENCY_BUCKETS)
        self.queue = make("vllm:request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.",
                          LATENCY_BUCKETS)
        self.inference = make("vllm:request_inference_time_seconds",
                              "Histogram of time spent in RUNNING phase for request.", LATENCY_BUCKETS)
        self.prefill = make("vllm:request_prefill_time_seconds",
                            "Histogram of time spent in PREFILL phase for request.", LATENCY_BUCKETS)
        self.decode = make("vllm:request_decode_time_seconds", "Histogram of time spent in DECODE phase for request.",
                           LATENCY_BUCKETS)
        assert documented == VLLM_METRICS, "every series of the list is made, once"
        self.aborts = Counter("nanovllm:requests_aborted", "Requests aborted (a client that left).", labels,
                              registry=self.registry).labels(model_name, ENGINE_INDEX)

    # ---- called with what the engine core sends (``serve/core_client.py``) ------------------------------

    def stepped(self, stats: StepStats) -> None:
        """After a unit of the engine core's work: the gauges, and, after a step, its tokens, prefix-cache
        lookups and preemptions."""
        self.running.set(stats.running)
        self.waiting.set(stats.waiting)
        self.kv_cache_usage.set(stats.kv_cache_usage)
        if stats.num_batched_tokens is None:
            return
        self.iteration.observe(stats.num_batched_tokens)
        self.prefix_queries.inc(stats.prefix_queries)
        self.prefix_hits.inc(stats.prefix_hits)
        self.preemptions.inc(stats.preemptions)

    def first_token(self, ttft_s: float, num_prompt_tokens: int) -> None:
        """A request's first token: its time to it, and its prompt's tokens counted."""
        self.ttft.observe(ttft_s)
        self.prompt_tokens.inc(num_prompt_tokens)

    def tokens(self, count: int, since_last_s: float | None) -> None:
        """``count`` new tokens of one sample, ``since_last_s`` after its previous one (None: its first)."""
        self.generation_tokens.inc(count)
        if since_last_s is not None:
            for _ in range(count):
                self.itl.observe(since_last_s / count)

    def finished(self, done: Finished) -> None:
        """A request whose samples have all finished (its times: its last sample's, from its first token)."""
        times = RequestTimes(done.arrival_s, done.num_prompt_tokens, done.first_token_s, done.finish_s,
                             done.num_output_tokens, done.finish_reason)
        self.success.labels(self.model_name, ENGINE_INDEX, API_FINISH_REASONS.get(times.finish_reason, "stop")).inc()
        self.request_prompt_tokens.observe(times.num_prompt_tokens)
        self.request_generation_tokens.observe(done.num_generated)
        self.max_num_generation_tokens.observe(done.max_tokens)
        self.params_n.observe(done.n)
        self.params_max_tokens.observe(done.max_tokens)
        self.queue.observe(max(0.0, done.scheduled_s - times.arrival_s))
        if times.tpot_s is not None:
            self.tpot.observe(times.tpot_s)
        if times.finish_s is not None:
            self.e2e.observe(times.finish_s - times.arrival_s)
            self.inference.observe(times.finish_s - done.scheduled_s)
            if times.first_token_s is not None:
                self.prefill.observe(times.first_token_s - done.scheduled_s)
                self.decode.observe(times.finish_s - times.first_token_s)

    def aborted(self) -> None:
        self.aborts.inc()

    def render(self) -> bytes:
        return generate_latest(self.registry)
