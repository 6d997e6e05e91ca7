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
          "stop": Text(en="finished: a stop string or stop token", zh="结束：停止字符串或停止 token"),
          "aborted": Text(en="aborted", zh="已中止")}

FIRST_BLOCK_OF_ROW = Text(en="first block id of the row", zh="本行第一个块的 id")
USED_BY_SEQ = Text(en="used (colour: its seq)", zh="已用（颜色：所属序列）")
FREED_AT_STEP_END = Text(en="freed at the step's end", zh="本步结束时释放")
SHARED = Text(en="shared (×refs)", zh="共享（×引用数）")
GROUP_ALL_USED = Text(en="{group} blocks, all used", zh="{group} 个块，全部已用")
GROUP_ONE_USED = Text(en="one of them used", zh="其中一个已用")
CACHED = Text(en="cached (free, hashed)", zh="已缓存（空闲，仍有哈希）")
FREE = Text(en="free", zh="空闲")
# The grid's title sums up the cache in the kinds its legend draws, which add up to the whole cache.
GRID_TITLE = Text(en="step {step}: {summary}", zh="第 {step} 步：{summary}")
GRID_SUMMARY = Text(en="{used} used ({shared} shared{max_refs}), {freed}{cached} cached, {free} free, of {total} blocks",
                    zh="已用 {used} 块（共享 {shared} 块{max_refs}），{freed}已缓存 {cached} 块，空闲 {free} 块，共 {total} 块")
GRID_MAX_REFS = Text(en=", max ×{refs}", zh="，最多 ×{refs}")
GRID_FREED = Text(en="{freed} freed at the step's end, ", zh="本步结束时释放 {freed} 块，")
GRID_GROUPS = Text(en="\none cell = {group} blocks; the darker, the more of them in use",
                   zh="\n一格 = {group} 个块；颜色越深，其中在用的越多")
GROUP_SUMMARY = Text(en="blocks {first}–{last}: {used} used{who}, {cached} cached, {free} free",
                     zh="块 {first}–{last}：已用 {used} 块{who}，已缓存 {cached} 块，空闲 {free} 块")
GROUP_OWNERS = Text(en=" ({owners})", zh="（{owners}）")
SEQ = Text(en="seq {seq_id}", zh="序列 {seq_id}")
QUEUE = {"waiting": Text(en="waiting", zh="等待队列"), "running": Text(en="running", zh="运行队列")}

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

# The player (viz/player.py): its controls, the step's header and the queues.
PLAYER_CONTROL = {"step": Text(en="step", zh="步"), "play": Text(en="play", zh="播放"),
                  "lang": Text(en="lang", zh="语言"), "detail": Text(en="detail", zh="详细程度"),
                  "block group": Text(en="block group", zh="块组")}
STEP_BACK = Text(en="one step back", zh="后退一步")
STEP_FORWARD = Text(en="one step forward", zh="前进一步")
PLAYER_HEADER = Text(en="<b>step {step}</b> of {last} · {phase} · batch {batch} · {tokens} tokens · {ms:.2f} ms · "
                        "{held} KV blocks held<br>KV at the end of the step: {summary}",
                     zh="<b>第 {step} 步</b>（共 {last} 步）· {phase} · batch {batch} · {tokens} 个 token · {ms:.2f} ms · "
                        "占用 {held} 个 KV 块<br>本步结束时的 KV 缓存：{summary}")
QUEUE_LINE = Text(en="<b>{queue}</b> ({n}): {ids}", zh="<b>{queue}</b>（{n}）：{ids}")
FINISHED_THIS_STEP = Text(en="finished this step", zh="本步结束的")
UNDERLINED_PREEMPTED = Text(en=" <small>(underlined: preempted)</small>", zh=" <small>（带下划线：被抢占过）</small>")
NO_LINES = Text(en="<i>(no TEACHING line at this verbosity)</i>", zh="<i>（这个详细程度下没有 TEACHING 行）</i>")
