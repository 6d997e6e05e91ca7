"""The sentences behind the TEACHING reason keys, in English and Chinese.

Part of the torch-free trace layer. The engine emits a stable key (``reason="no_prefill_ready"``); the
console renderer and the widgets show the sentence for it. A key with no sentence shows as itself, so a
new engine event is never hidden, only untranslated.

A few keys are shared by several events with different meanings (``finished`` is both a sequence's state
change and the freeing of its blocks); ``EVENT_REASONS`` holds those per-event sentences and wins over
``REASONS``.
"""

from __future__ import annotations

LANGS = ("en", "zh")

# reason key -> {lang: sentence}
REASONS: dict[str, dict[str, str]] = {
    # start-up
    "engine_starting": {"en": "engine starting: configuration read and validated",
                        "zh": "引擎启动：配置已读取并校验"},
    "runtime_ready": {"en": "this rank's device and runtime are ready",
                      "zh": "本 rank 的设备与运行时已就绪"},
    "weights_loaded": {"en": "model weights loaded from safetensors",
                       "zh": "模型权重已从 safetensors 载入"},
    "expose_peak_memory": {"en": "warm-up at the largest batch the limits allow, to expose peak memory",
                           "zh": "按上限跑一次最大批预热，暴露显存峰值"},
    "size_kv_cache_from_memory": {"en": "KV cache sized from the memory left after warm-up",
                                  "zh": "按预热后剩余内存（GPU 上即显存）估算 KV cache 块数"},
    "size_kv_cache_cpu_cap": {"en": "KV cache sized by the CPU cap cpu_kvcache_gib, below what the memory left "
                                    "after warm-up allows",
                              "zh": "KV cache 块数由 CPU 上限 cpu_kvcache_gib 决定，小于预热后剩余内存所允许的"},
    "compiled_forward": {"en": "decode step through the torch.compile'd forward (compile=True)",
                         "zh": "decode 走 torch.compile 编译后的前向（compile=True）"},
    "compile_decode_step": {"en": "decode forward compiled with torch.compile",
                            "zh": "用 torch.compile 编译 decode 前向"},
    "step_rolled_back": {"en": "the step was interrupted and undone: its blocks go back to whoever held them "
                               "before it",
                         "zh": "该步被中断并撤销：KV 块归还给该步之前的持有者"},
    "engine_ready": {"en": "engine ready: KV cache allocated, scheduler built",
                     "zh": "引擎就绪：KV cache 已分配，调度器已建立"},
    "capture_decode_graphs": {"en": "decode CUDA graphs captured, one per batch-size bucket",
                              "zh": "按 batch size 档位逐个录制 decode 的 CUDA Graph"},
    # generate() and requests
    "batch_enters_engine": {"en": "a batch of requests enters the engine",
                            "zh": "批量请求进入引擎"},
    "new_request_waiting": {"en": "new request joins the waiting queue",
                            "zh": "新请求进入 waiting 队列"},
    "queues_empty": {"en": "waiting and running are both empty",
                     "zh": "waiting/running 均为空"},
    "request_aborted": {"en": "request aborted: everything it held is given back",
                        "zh": "请求被中止，归还其占用的全部资源"},
    # scheduling
    "waiting_admitted": {"en": "the waiting queue has requests that can be admitted",
                         "zh": "waiting 队列有可准入请求"},
    "no_prefill_ready": {"en": "nothing to prefill: decode the running batch (continuous batching)",
                         "zh": "无可 prefill 请求，转入 decode 连续批"},
    "no_free_block_for_decode": {"en": "no free KV block for decode: preempt the newest running sequence",
                                 "zh": "decode 时没有空闲 KV 块，抢占 running 队尾最新的序列"},
    # KV blocks
    "prefix_blocks_reused": {"en": "leading blocks found in the prefix cache are reused",
                             "zh": "前缀缓存命中，复用已有的 KV 块"},
    "admit_sequence": {"en": "KV blocks allocated for an admitted sequence",
                       "zh": "为准入的序列分配 KV 块"},
    "decode_needs_new_block": {"en": "the next token starts a new block: one more KV block",
                               "zh": "下一个 token 进入新块，追加一个 KV 块"},
    # execution
    "flatten_prompts": {"en": "prompts flattened into one token row, cu_seqlens marks the boundaries",
                        "zh": "各序列 token 拼成一维，cu_seqlens 标出边界"},
    "one_token_per_sequence": {"en": "one token per sequence; K/V come from the cache via block_tables",
                               "zh": "每条序列一个 token，K/V 经 block_tables 从 cache 读取"},
    "eager_forward": {"en": "eager forward pass",
                      "zh": "eager 模式前向"},
    "replay_decode_graph": {"en": "decode replays the CUDA graph of the smallest bucket that holds the batch",
                            "zh": "decode 重放不小于当前 batch 的最小档位的 CUDA Graph"},
    "sample_next_tokens": {"en": "sample each sequence's next token at its temperature",
                           "zh": "按各自温度为每条序列采样下一个 token"},
    "step_complete": {"en": "engine step done",
                      "zh": "本步完成"},
    # a sequence's state changes
    "prefill_scheduled": {"en": "scheduled for prefill: waiting -> running",
                          "zh": "准入 prefill：从 waiting 进入 running"},
    "finished_eos": {"en": "hit eos: the sequence is done",
                     "zh": "命中 eos，序列结束"},
    "finished_length": {"en": "reached max_tokens: the sequence is done",
                        "zh": "达到 max_tokens，序列结束"},
    "finished_max_model_len": {"en": "reached max_model_len: the sequence is done",
                               "zh": "达到 max_model_len，序列结束"},
    "preempted": {"en": "preempted: back to the head of waiting, to be recomputed",
                  "zh": "被抢占：回到 waiting 队首，之后重算"},
    "aborted": {"en": "request aborted",
                "zh": "请求被中止"},
    "finished": {"en": "sequence finished",
                 "zh": "序列结束"},
}

# (event, reason key) -> {lang: sentence}, for keys whose meaning depends on the event.
EVENT_REASONS: dict[tuple[str, str], dict[str, str]] = {
    ("BLOCK_FREE", "finished"): {"en": "finished sequence gives its KV blocks back",
                                 "zh": "序列结束，归还 KV 块"},
    ("BLOCK_FREE", "preempted"): {"en": "preempted sequence gives its KV blocks back",
                                  "zh": "序列被抢占，归还 KV 块"},
    ("BLOCK_FREE", "aborted"): {"en": "aborted request gives its KV blocks back",
                                "zh": "请求被中止，归还 KV 块"},
}


def has_sentence(reason: str, event: str | None = None) -> bool:
    """Whether ``reason`` (as emitted with ``event``) has sentences."""
    return (event, reason) in EVENT_REASONS or reason in REASONS


def explain(reason: str, lang: str = "en", event: str | None = None) -> str:
    """The sentence for ``reason`` in ``lang`` ("en" or "zh"); the key itself if there is none."""
    if lang not in LANGS:
        raise ValueError(f"lang must be one of {LANGS}, got {lang!r}")
    sentences = EVENT_REASONS.get((event, reason)) if event is not None else None
    sentences = sentences or REASONS.get(reason)
    return sentences[lang] if sentences is not None else reason
