"""What the pictures say, in English and Chinese: axis labels, titles and legends, in one place.

A picture is drawn in the chosen language (``nanovllm_teach.i18n``): ``say(BATCH_SIZE)``. The replay page,
drawn in the browser, has its own table in ``page_assets/common.js``, with the same words.

No torch. Emits no events.
"""

from __future__ import annotations

from nanovllm_teach.i18n import Text

TIMELINE_TITLE = Text(en="{name}: {steps} steps, {prefill} prefill", zh="{name}：{steps} 步，其中 {prefill} 步预填充")
ENGINE_STEP = Text(en="engine step", zh="引擎步")
BATCH_SIZE = Text(en="batch size", zh="batch 大小")
KV_BLOCKS_HELD = Text(en="KV blocks held\n(of {total})", zh="占用的 KV 块\n（共 {total} 块）")
STEP_LATENCY = Text(en="step latency\n(ms)", zh="每步延迟\n（ms）")
TOKENS_COMPUTED = Text(en="tokens\ncomputed", zh="计算的\ntoken 数")
QUEUE_LENGTH = Text(en="queue length", zh="队列长度")
PREDICTED_STEP = Text(en="predicted step", zh="预测的步")
BOUND = {"compute": Text(en="compute-bound", zh="计算受限"), "memory": Text(en="memory-bound", zh="访存受限"),
         "launch": Text(en="launch-bound", zh="启动受限")}
STEP_CONVENTION = Text(en="column N: step N as it ran\n(what it frees shows after it)",
                       zh="第 N 列：第 N 步运行时的状态\n（它释放的，画在它之后）")
PHASE = {"prefill": Text(en="prefill", zh="预填充"), "decode": Text(en="decode", zh="解码")}
PREEMPTION = Text(en="preemption", zh="抢占")

GANTT_TITLE = Text(en="requests over engine steps", zh="各请求在引擎步上的经历")
STATE = {"waiting": Text(en="waiting", zh="等待"), "preempted": Text(en="preempted", zh="被抢占后等待"),
         "prefill": Text(en="prefill", zh="预填充"), "decode": Text(en="decode", zh="解码"),
         "stalled": Text(en="stalled", zh="停顿（他人在预填充）"),
         "held": Text(en="held (finished, slot not released)", zh="占位（已结束，名额未释放）")}
PREEMPTED = Text(en="preempted", zh="被抢占")
FINISH = {"eos": Text(en="finished: EOS", zh="结束：EOS"), "length": Text(en="finished: max_tokens", zh="结束：max_tokens"),
          "max_model_len": Text(en="finished: max_model_len", zh="结束：max_model_len"),
          "aborted": Text(en="aborted", zh="已中止")}

FIRST_BLOCK_OF_ROW = Text(en="first block id of the row", zh="本行第一个块的 id")
USED_BY_SEQ = Text(en="used (colour: its seq)", zh="已用（颜色：所属序列）")
FREED_AT_STEP_END = Text(en="freed at the step's end", zh="本步结束时释放")
SHARED = Text(en="shared (×refs)", zh="共享（×引用数）")
GROUP_ALL_USED = Text(en="{group} blocks, all used", zh="{group} 个块，全部已用")
GROUP_ONE_USED = Text(en="one of them used", zh="其中一个已用")
CACHED = Text(en="cached (free, hashed)", zh="已缓存（空闲，仍有哈希）")
FREE = Text(en="free", zh="空闲")

# The side-by-side comparison (viz/compare.py): each half's title, and the summary's rows, printed by
# ``nanovllm-teach compare`` and drawn under the pictures.
POLICY_NAME = {"continuous": Text(en="continuous", zh="连续批处理"), "static": Text(en="static", zh="静态批处理")}
COMPARE_TITLE = Text(en="{label} ({policy}): {steps} steps, {tokens_per_step:.2f} tokens/step",
                     zh="{label}（{policy}）：{steps} 步，每步 {tokens_per_step:.2f} 个 token")
SUMMARY_ROW = {
    "policy": Text(en="policy", zh="调度策略"),
    "num_requests": Text(en="requests", zh="请求数"),
    "steps": Text(en="steps", zh="步数"),
    "prefill_decode": Text(en="  prefill / decode", zh="  其中预填充 / 解码"),
    "output_tokens": Text(en="output tokens", zh="输出 token 数"),
    "tokens_per_step": Text(en="tokens / step", zh="每步 token 数"),
    "wall_s": Text(en="wall time (s)", zh="总用时（秒）"),
    "tokens_per_s": Text(en="tokens / s", zh="每秒 token 数"),
    "mean_ttft_ms": Text(en="mean TTFT (ms)", zh="平均首 token 延迟（ms）"),
    "mean_ttft_steps": Text(en="mean TTFT (steps)", zh="平均首 token 延迟（步）"),
    "early_finished_waste": Text(en="early-finished waste (slot-steps)", zh="提前结束的浪费（名额·步）"),
    "late_joining_waste": Text(en="late-joining waste (slot-steps)", zh="迟迟未加入的浪费（名额·步）"),
}
