"""The sentences behind the TEACHING reason keys, in English and Chinese, for each event.

Part of the torch-free trace layer; emits nothing. The engine emits an event with a stable reason key
(``reason="no_prefill_ready"``); the console renderer and the widgets show the key's sentence. The table is
keyed by the event's payload type (``events.py``), so the sentences of an event sit with the keys it is
emitted with, and one key can mean different things for different events (``preempted`` is a sequence's
state change on STATE_TRANSITION and the return of its blocks on BLOCK_FREE).

A key with no sentence shows as itself, so a new engine event is never hidden, only untranslated.
"""

from __future__ import annotations

from nanovllm_teach.i18n import LANGS, resolve_lang
from nanovllm_teach.trace.events import (
    BlockAllocate, BlockFree, CudagraphCapture, CudagraphReplay, DecodeCompile, EngineInit, EngineReady,
    GenerateFinish, GenerateStart, KvBudgetEstimate, ModelWeightsLoaded, PreparePrefillTensors,
    PrepareDecodeTensors, Preempt, PrefixCacheHit, RequestAbort, RequestEnqueue, RunModel, Sample,
    ScheduleDecode, SchedulePrefill, StateTransition, StepDone, TpRuntimeInit, Warmup,
)
from nanovllm_teach.trace.payload import Payload


def _say(en: str, zh: str) -> dict[str, str]:
    return {"en": en, "zh": zh}


# A rolled-back step gives blocks back and takes them again with the same key.
_ROLLED_BACK = _say("the step was interrupted and undone: its blocks go back to whoever held them before it",
                    "该步被中断并撤销：KV 块归还给该步之前的持有者")

# event's payload type -> {reason key it is emitted with -> {lang: sentence}}, in the order a run emits them.
SENTENCES: dict[type[Payload], dict[str, dict[str, str]]] = {
    EngineInit: {
        "engine_starting": _say("engine starting: configuration read and validated",
                                "引擎启动：配置已读取并校验"),
    },
    TpRuntimeInit: {
        "runtime_ready": _say("this rank's device and runtime are ready",
                              "本 rank 的设备与运行时已就绪"),
    },
    ModelWeightsLoaded: {
        "weights_loaded": _say("model weights loaded from safetensors",
                               "模型权重已从 safetensors 载入"),
    },
    Warmup: {
        "expose_peak_memory": _say("warm-up at the largest batch the limits allow, to expose peak memory",
                                   "按上限跑一次最大批预热，暴露显存峰值"),
    },
    KvBudgetEstimate: {
        "size_kv_cache_from_memory": _say("KV cache sized from the memory left after warm-up",
                                          "按预热后剩余内存（GPU 上即显存）估算 KV 缓存的块数"),
        "size_kv_cache_cpu_cap": _say("KV cache sized by the CPU cap (cpu_kvcache_gib; unset: a share of the memory "
                                      "available at start-up, or what the limits can fill), below what the memory "
                                      "left after warm-up allows",
                                      "KV 缓存的块数由 CPU 上限决定（cpu_kvcache_gib；未设置时取启动时可用内存的一部分，"
                                      "或各项上限所能用满的量），小于预热后剩余内存所允许的"),
    },
    CudagraphCapture: {
        "capture_decode_graphs": _say("decode CUDA graphs captured, one per batch-size bucket",
                                      "按 batch size 档位逐个录制解码的 CUDA Graph"),
    },
    DecodeCompile: {
        "compile_decode_step": _say("decode forward compiled ahead of time into native code (built once per "
                                    "machine, then loaded)",
                                    "解码的前向计算预先编译成原生代码（每台机器构建一次，之后直接载入）"),
    },
    EngineReady: {
        "engine_ready": _say("engine ready: KV cache allocated, scheduler built",
                             "引擎就绪：KV 缓存已分配，调度器已建立"),
    },
    GenerateStart: {
        "batch_enters_engine": _say("a batch of requests enters the engine",
                                    "批量请求进入引擎"),
    },
    GenerateFinish: {
        "queues_empty": _say("waiting and running are both empty",
                             "waiting/running 均为空"),
    },
    RequestEnqueue: {
        "new_request_waiting": _say("new request joins the waiting queue",
                                    "新请求进入 waiting 队列"),
    },
    RequestAbort: {
        "request_aborted": _say("request aborted: everything it held is given back",
                                "请求被中止，归还其占用的全部资源"),
    },
    SchedulePrefill: {
        "waiting_admitted": _say("the waiting queue has requests that can be admitted",
                                 "waiting 队列有可准入请求"),
    },
    ScheduleDecode: {
        "no_prefill_ready": _say("nothing to prefill: decode the running batch (continuous batching)",
                                 "没有可预填充的请求：对运行中的 batch 做解码（连续批处理）"),
    },
    Preempt: {
        "no_free_block_for_decode": _say("no free KV block for decode: preempt the newest running sequence",
                                         "解码时没有空闲 KV 块：抢占 running 队尾最新的序列"),
    },
    PrefixCacheHit: {
        "prefix_blocks_reused": _say("leading blocks found in the prefix cache are reused",
                                     "前缀缓存命中，复用已有的 KV 块"),
    },
    BlockAllocate: {
        "admit_sequence": _say("KV blocks allocated for an admitted sequence",
                               "为准入的序列分配 KV 块"),
        "decode_needs_new_block": _say("the next token starts a new block: one more KV block",
                                       "下一个 token 进入新块，追加一个 KV 块"),
        "step_rolled_back": _ROLLED_BACK,
    },
    BlockFree: {
        "finished": _say("finished sequence gives its KV blocks back",
                         "序列结束，归还 KV 块"),
        "preempted": _say("preempted sequence gives its KV blocks back",
                          "序列被抢占，归还 KV 块"),
        "aborted": _say("aborted request gives its KV blocks back",
                        "请求被中止，归还 KV 块"),
        "step_rolled_back": _ROLLED_BACK,
    },
    PreparePrefillTensors: {
        "flatten_prompts": _say("prompts flattened into one token row, cu_seqlens marks the boundaries",
                                "各序列 token 拼成一维，cu_seqlens 标出边界"),
    },
    PrepareDecodeTensors: {
        "one_token_per_sequence": _say("one token per sequence; K/V come from the cache via block_tables",
                                       "每条序列一个 token，K/V 经 block_tables 从 cache 读取"),
    },
    RunModel: {
        "eager_forward": _say("eager forward pass",
                              "eager 模式前向"),
        "compiled_forward": _say("decode step as one call into the native decode step (engine/compiled_decode.py)",
                                 "解码步以一次调用跑在原生解码步里（engine/compiled_decode.py）"),
    },
    CudagraphReplay: {
        "replay_decode_graph": _say("decode replays the CUDA graph of the smallest bucket that holds the batch",
                                    "解码重放能容纳当前 batch 的最小档位的 CUDA Graph"),
    },
    Sample: {
        "sample_next_tokens": _say("sample each sequence's next token at its temperature",
                                   "按各自温度为每条序列采样下一个 token"),
    },
    StateTransition: {
        "prefill_scheduled": _say("scheduled for prefill: waiting -> running",
                                  "准入预填充：从 waiting 进入 running"),
        "finished_eos": _say("hit eos: the sequence is done",
                             "命中 eos，序列结束"),
        "finished_length": _say("reached max_tokens: the sequence is done",
                                "达到 max_tokens，序列结束"),
        "finished_max_model_len": _say("reached max_model_len: the sequence is done",
                                       "达到 max_model_len，序列结束"),
        "finished_stop": _say("hit one of its stop strings or stop token ids: the sequence is done",
                              "命中它的停止字符串或停止 token，序列结束"),
        "preempted": _say("preempted: back to the head of waiting, to be recomputed",
                          "被抢占：回到 waiting 队首，之后重算"),
        "aborted": _say("request aborted",
                        "请求被中止"),
    },
    StepDone: {
        "step_complete": _say("engine step done",
                              "本步完成"),
    },
}

# (event, reason key) -> {lang: sentence}: every sentence, by event name.
EVENT_REASONS: dict[tuple[str, str], dict[str, str]] = {
    (payload.event, key): sentences for payload, keys in SENTENCES.items() for key, sentences in keys.items()}


def _one_meaning() -> dict[str, dict[str, str]]:
    """The keys that mean the same with every event they are emitted with, and that sentence."""
    meanings: dict[str, list[dict[str, str]]] = {}
    for (_, key), sentences in EVENT_REASONS.items():
        if sentences not in meanings.setdefault(key, []):
            meanings[key].append(sentences)
    return {key: said[0] for key, said in meanings.items() if len(said) == 1}


# reason key -> {lang: sentence}, for a key said without its event (``explain(key)``): the keys that mean
# one thing whatever the event. A key that means different things (``preempted``) needs its event.
REASONS: dict[str, dict[str, str]] = _one_meaning()


def has_sentence(reason: str, event: str | None = None) -> bool:
    """Whether ``reason`` (as emitted with ``event``) has sentences."""
    return (event, reason) in EVENT_REASONS or reason in REASONS


def explain(reason: str, lang: str | None = None, event: str | None = None) -> str:
    """The sentence for ``reason`` in ``lang`` ("en" or "zh"; None: the chosen language, ``i18n``), as
    emitted with ``event`` (the event's name); the key itself if there is none."""
    lang = resolve_lang(lang)
    sentences = EVENT_REASONS.get((event, reason)) or REASONS.get(reason)
    return sentences[lang] if sentences is not None else reason
