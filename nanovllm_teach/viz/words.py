"""Every word the pictures say, in English and Chinese, written once: titles, axis labels, legends, controls.

Who reads it: the figures (``timeline``, ``gantt``, ``blockgrid``, ``compare``, ``report``), the ``Player``,
the replay page and the live view (through ``page_words``, which hands their script these words by the
keys it reads), and the explanatory diagrams (``diagrams``). A word that two pictures show is one entry
here, so the page, the figures and the diagrams cannot drift apart; a picture says it with ``say``
(``nanovllm_teach.i18n``). A figure breaks a long axis label over two lines ("\\n"); the page draws it on
one. Class, method, event and tensor names are code and stay as they are, in both languages.

Part of the torch-free viz layer. Emits no events.
"""

from __future__ import annotations

from nanovllm_teach.i18n import Text


def _over(top: Text, bottom: Text) -> Text:
    """``top`` with ``bottom`` on the line under it."""
    return Text(en=f"{top.en}\n{bottom.en}", zh=f"{top.zh}\n{bottom.zh}")


# ---- every trace picture: steps, phases, requests ---------------------------------------------------------

STEP = Text(en="step", zh="步")
ENGINE_STEP = Text(en="engine step", zh="引擎步")
STEP_HEADER = Text(en="step {step} of {last} · {phase} · batch {batch} · {tokens} tokens · {ms} ms",
                   zh="第 {step} 步（共 {last} 步）· {phase} · 批大小 {batch} · {tokens} 个 token · {ms} ms")
PHASE = {"prefill": Text(en="prefill", zh="预填充"), "decode": Text(en="decode", zh="解码")}
PREEMPTION = Text(en="preemption", zh="抢占")
SEQ = Text(en="seq {seq_id}", zh="序列 {seq_id}")
# How each language joins a label to its value and puts an aside in brackets (Chinese: full-width marks).
LABEL_VALUE = Text(en="{label}: {value}", zh="{label}：{value}")
IN_BRACKETS = Text(en=" ({inner})", zh="（{inner}）")

# ---- the timelines ----------------------------------------------------------------------------------------

TIMELINES = Text(en="Timelines", zh="时间线")
TIMELINE_TITLE = Text(en="{name}: {steps} steps, {prefill} prefill", zh="{name}：{steps} 步，其中 {prefill} 步预填充")
BATCH_SIZE = Text(en="batch size", zh="批大小")
# The figures count the blocks a step held while it ran; the page and the live view, those used after it.
KV_BLOCKS_HELD = Text(en="KV blocks held", zh="占用的 KV 块")
KV_BLOCKS_USED = Text(en="KV blocks used", zh="已用 KV 块")
OF_TOTAL_BLOCKS = Text(en="(of {total})", zh="（共 {total} 块）")
KV_BLOCKS_HELD_OF = _over(KV_BLOCKS_HELD, OF_TOTAL_BLOCKS)
KV_BLOCKS_USED_OF = _over(KV_BLOCKS_USED, OF_TOTAL_BLOCKS)
STEP_LATENCY = Text(en="step latency\n(ms)", zh="每步延迟\n（ms）")
LOG_SCALE = Text(en=", log", zh="，对数坐标")
TOKENS_COMPUTED = Text(en="tokens\ncomputed", zh="计算的\ntoken 数")
QUEUE = {"waiting": Text(en="waiting", zh="等待队列"), "running": Text(en="running", zh="运行队列")}
QUEUE_LENGTH = Text(en="queue length", zh="队列长度")
PREDICTED_STEP = Text(en="predicted step", zh="预测的步")
BOUND = {"compute": Text(en="compute-bound", zh="计算受限"), "memory": Text(en="memory-bound", zh="访存受限"),
         "launch": Text(en="launch-bound", zh="启动受限")}
# The figures draw a step as it ran, the page the state at its end: each picture says which.
STEP_CONVENTION = Text(en="column N: step N as it ran\n(what it frees shows after it)",
                       zh="第 N 列：第 N 步运行时的状态\n（它释放的，画在它之后）")
PAGE_CONVENTION = Text(
    en="Every panel draws the state at the end of step N over step N; the red cursor is the step shown. "
       "Click a timeline or the Gantt chart to jump to a step.",
    zh="每个面板都把第 N 步结束时的状态画在第 N 步上；红色游标即当前步。点击时间线或甘特图可跳到该步。")

# ---- the request Gantt chart ------------------------------------------------------------------------------

REQUESTS = Text(en="Requests", zh="请求")
GANTT_CHART = Text(en="request Gantt chart", zh="请求甘特图")
GANTT_TITLE = Text(en="requests over engine steps", zh="各请求在引擎步上的经历")
GANTT_ROWS = Text(en="{n} of the {total} requests in these steps, one row each",
                  zh="这些步里有 {n} 个请求（共 {total} 个），每个一行")
GANTT_SCROLL = Text(en=": scroll the chart", zh="：可滚动查看")
BLOCKS_N = Text(en="{n} blocks", zh="{n} 块")
STATE = {"waiting": Text(en="waiting", zh="等待"), "preempted": Text(en="preempted", zh="被抢占后等待"),
         "prefill": PHASE["prefill"], "decode": PHASE["decode"],
         "stalled": Text(en="stalled", zh="停顿（他人在预填充）"),
         "held": Text(en="held (finished, slot not released)", zh="占位（已结束，名额未释放）")}
FINISH_REASON = {"eos": Text(en="EOS", zh="遇到 EOS"), "length": Text(en="max_tokens reached", zh="达到 max_tokens"),
                 "max_model_len": Text(en="max_model_len reached", zh="达到 max_model_len"),
                 "stop": Text(en="a stop string or stop token", zh="遇到停止字符串或停止 token")}
ABORTED = Text(en="aborted", zh="已中止")
# The Gantt chart's finish markers: how each request ended.
FINISHED = {**{reason: Text(en=f"finished: {text.en}", zh=f"结束：{text.zh}") for reason, text in FINISH_REASON.items()},
            "aborted": ABORTED}

# ---- the queues at the end of a step ----------------------------------------------------------------------

QUEUES_AT_STEP_END = Text(en="Queues at the end of the step", zh="本步结束时的队列")
QUEUE_HEAD = Text(en="{queue} ({n}): ", zh="{queue}（{n}）：")
FINISHED_THIS_STEP = Text(en="finished this step", zh="本步结束的请求")
UNDERLINED_PREEMPTED = Text(en=" (underlined: preempted)", zh="（带下划线：被抢占过）")

# ---- the KV block grid ------------------------------------------------------------------------------------

KV_BLOCKS_AT_STEP_END = Text(en="KV blocks at the end of the step", zh="本步结束时的 KV 块")
FIRST_BLOCK_OF_ROW = Text(en="first block id of the row", zh="本行第一个块的 id")
USED_BY_SEQ = Text(en="used (colour: its seq)", zh="已用（颜色：所属序列）")
FREED_AT_STEP_END = Text(en="freed at the step's end", zh="本步结束时释放")
SHARED = Text(en="shared (×refs)", zh="共享（×引用数）")
GROUP_ALL_USED = Text(en="{group} blocks, all used", zh="{group} 个块，全部已用")
GROUP_ONE_USED = Text(en="one of them used", zh="其中一个已用")
GROUP_FILLED = Text(en="used (colour: the seq of its first used block; filled by the share used)",
                    zh="已用（颜色：格内第一个已用块所属的序列；填充高度为已用比例）")
CACHED = Text(en="cached (free, hashed)", zh="已缓存（空闲，仍有哈希）")
FREE = Text(en="free", zh="空闲")
# The grid's title sums up the cache in the kinds its legend draws, which add up to the whole cache.
GRID_TITLE = Text(en="step {step}: {summary}", zh="第 {step} 步：{summary}")
GRID_SUMMARY = Text(en="{used} used ({shared} shared{max_refs}), {freed}{cached} cached, {free} free, of {total} blocks",
                    zh="已用 {used} 块（共享 {shared} 块{max_refs}），{freed}已缓存 {cached} 块，空闲 {free} 块，共 {total} 块")
GRID_MAX_REFS = Text(en=", max ×{refs}", zh="，最多 ×{refs}")
GRID_FREED = Text(en="{freed} freed at the step's end, ", zh="本步结束时释放 {freed} 块，")
GRID_CELL = Text(en="one cell = {group} blocks", zh="一格 = {group} 个块")
GROUP_SUMMARY = Text(en="blocks {first}–{last}: {used} used{who}, {cached} cached, {free} free",
                     zh="块 {first}–{last}：已用 {used} 块{who}，已缓存 {cached} 块，空闲 {free} 块")
BLOCK_N = Text(en="block {i}", zh="第 {i} 块")
SHARED_BY = Text(en="shared ×{refs}: {seqs}", zh="共享 ×{refs}：{seqs}")
HOVER_A_CELL = Text(en="hover or click a cell to read it", zh="悬停或点击格子查看")

# ---- the controls and panels of the Player and the replay page --------------------------------------------

REPLAY = Text(en="Replay", zh="回放")
# The viewer's play speed and the steps its charts show at once.
SPEED = Text(en="play speed", zh="播放速度")
WHOLE_RUN_IN = Text(en="whole run in {s} s", zh="{s} 秒放完全程")
ZOOM = Text(en="steps the charts show", zh="图中显示的步数")
ALL_STEPS = Text(en="all {n} steps", zh="全部 {n} 步")
WINDOW_STEPS = Text(en="{n} steps at a time", zh="每次 {n} 步")
# Before a lesson the trace wrote itself (not a shipped scenario's, which is shown in the reader's language).
TRACE_OWN_TEXT = Text(en="(the trace's own words)", zh="（trace 自带的原文）")
PLAY = Text(en="play", zh="播放")
PAUSE = Text(en="pause", zh="暂停")
STEP_BACK = Text(en="step back", zh="上一步")
STEP_FORWARD = Text(en="step forward", zh="下一步")
SHORTCUT = Text(en="key: {key}", zh="快捷键：{key}")
SPACE_BAR = Text(en="space bar", zh="空格键")
LANGUAGE = Text(en="lang", zh="语言")
DETAIL = Text(en="detail", zh="详细程度")
BLOCK_GROUP = Text(en="block group", zh="块组")
TEACHING_LINES = Text(en="TEACHING lines of the step", zh="本步的 TEACHING 日志")
NO_LINES_IN_STEP = Text(en="(no TEACHING line in this step)", zh="（本步没有 TEACHING 日志）")
NO_LINES_AT_DETAIL = Text(en="(no TEACHING line at this detail level)", zh="（这个详细程度下没有 TEACHING 日志）")

# ---- the live view (``serve``'s ``/live``): its ticker and its switch --------------------------------------

LIVE = Text(en="Live", zh="实时")
LIVE_IDLE = Text(en="Live: waiting for the first request…", zh="实时：等待第一个请求…")
LIVE_FULL = Text(en="(the page stops here: too many events to keep)", zh="（页面到此为止：事件太多，不再保留）")
LIVE_GONE = Text(en="Live: the server is gone", zh="实时：服务器已停止")
FOLLOW_NEWEST = Text(en="follow the newest step", zh="跟随最新的步")

# ---- the side-by-side comparison: each half's title, and the summary's rows (printed and drawn) ----------

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

# ---- the HTML report: its title and the headings over its pictures and tables -----------------------------

REPORT_TITLE = Text(en="nanovllm_teach trace: {name}", zh="nanovllm_teach trace 报告：{name}")
REPORT_HEADING = Text(en="Trace: {name}", zh="Trace 报告：{name}")
REPORT_SUMMARY = Text(en="Summary", zh="概要")
OVERVIEW = Text(en="Timelines and requests", zh="时间线与请求")
OVERVIEW_ALT = Text(en="timelines and request Gantt chart", zh="时间线与请求甘特图")
BLOCKS_AT_PEAK = Text(en="KV blocks at the end of step {step} (peak use)", zh="第 {step} 步结束时的 KV 块（占用最多的一步）")
BLOCKS_AT_PEAK_ALT = Text(en="KV block grid at step {step}", zh="第 {step} 步的 KV 块网格")
REPORT_STEPS = Text(en="Steps", zh="每一步")
TRACE_HEADER = Text(en="Trace header", zh="Trace 头部信息")

# ---- the explanatory diagrams (``diagrams``), one section each, named after its diagram; the words above
# (a step's phase, how a request finished, a block's number) are theirs too.

# ---- engine_layers ----------------------------------------------------------------------------------------

LAYERS_TITLE = Text(en="one LLMEngine.step(), through the engine's three layers",
                    zh="一次 LLMEngine.step() 穿过引擎的三层")
LAYERS_STEP_TITLE = Text(en="step {step} ({phase}): each event listed by the class whose work it reports",
                         zh="第 {step} 步（{phase}）：每个事件列在它所报告的那个类下面")
LAYERS_NAME = {
    "orchestration": Text(en="orchestration", zh="编排层"),
    "resources": Text(en="resources", zh="资源层"),
    "execution": Text(en="execution", zh="执行层"),
}
LAYERS_ROLE = {
    "orchestration": Text(en="prompts in, outputs out; the step loop; says every decision as a TEACHING event",
                          zh="接收 prompt、交回输出；驱动每一步；把每个决策写成 TEACHING 事件"),
    "resources": Text(en="who runs this step, which KV blocks each sequence holds: pure Python, no torch",
                      zh="这一步谁来运行、每个序列占哪些 KV 块：纯 Python，不用 torch"),
    "execution": Text(en="tensors: the flattened batch, slot mapping, forward pass, sampling",
                      zh="张量：展平的 batch、槽位映射、前向计算、采样"),
}
LAYERS_CLASS_ROLE = {
    "LLMEngine": Text(en="step(): schedule → run → postprocess", zh="step()：调度 → 运行 → 后处理"),
    "Teaching": Text(en="turns the records into TEACHING events", zh="把决策记录写成 TEACHING 事件"),
    "transaction": Text(en="checkpoint before the step,\nrollback if it raises", zh="每步之前打检查点，\n出错则回滚"),
    "Scheduler": Text(en="prefill first, else decode;\npreempts when blocks run out", zh="先预填充，否则解码；\n块不够时抢占"),
    "BlockManager": Text(en="hands out and frees KV blocks,\nshares prefixes by hash", zh="分配、释放 KV 块，\n按哈希共享前缀"),
    "Sequence": Text(en="one request: its tokens,\nstatus and block table", zh="一个请求：它的 token、\n状态和块表"),
    "ModelRunner": Text(en="batch → tensors → one token per sequence", zh="batch → 张量 → 每个序列一个 token"),
    "model": Text(en="embedding, decoder layers, LM head", zh="词嵌入、解码器层、LM head"),
    "layers": Text(en="attention over the paged KV cache,\nlinear, RMSNorm, RoPE, sampler",
                   zh="读分页 KV 缓存的注意力，\n线性层、RMSNorm、RoPE、采样器"),
}
LAYERS_SCHEDULE = Text(en="① schedule()", zh="① schedule()\n调度")
LAYERS_RUN = Text(en="② run(batch) → token ids", zh="② run(batch) → 每个序列一个 token id")
LAYERS_POSTPROCESS = Text(en="③ postprocess()", zh="③ postprocess()\n后处理")
LAYERS_RECORDS = Text(en="decisions\n(records)", zh="决策\n（记录）")
LAYERS_HANDS_ON = Text(en="records", zh="记录")
LAYERS_TRACE = Text(en="the trace", zh="trace 记录")
LAYERS_TEACHING_EVENTS = Text(en="TEACHING\nevents", zh="TEACHING\n事件")
LAYERS_OWN_EVENTS = Text(en="ModelRunner's\nown events", zh="ModelRunner\n自己的事件")
LAYERS_NO_EVENTS = Text(en="(no event this step)", zh="（本步没有事件）")

# ---- sequence_states --------------------------------------------------------------------------------------

STATES_TITLE = Text(en="the life of a Sequence (SequenceStatus)", zh="一个 Sequence 的一生（SequenceStatus）")
STATES_COUNTED = Text(en="the life of a Sequence: how often each edge was taken in this trace ({n} requests)",
                      zh="一个 Sequence 的一生：这份 trace 中每条边走过几次（共 {n} 个请求）")
STATES_NOTE = {
    "WAITING": Text(en="in the waiting queue", zh="在等待队列中"),
    "RUNNING": Text(en="in the running batch,\nholding KV blocks", zh="在运行中的 batch 里，\n占着 KV 块"),
    "FINISHED": Text(en="left the engine,\nits blocks freed", zh="已离开引擎，\n块已释放"),
}
STATES_ENTER = Text(en="add_request()", zh="add_request() 加入")
STATES_ADMITTED = Text(en="admitted by schedule():\nits whole prompt prefilled", zh="被 schedule() 接纳：\n整个 prompt 完成预填充")
STATES_PREEMPTED = Text(en="preempted: no free KV block,\nrecomputed later", zh="被抢占：没有空闲 KV 块，\n之后重计算")
STATES_FINISHED_BY = Text(en="finished in postprocess():", zh="在 postprocess() 中结束：")
STATES_TIMES = Text(en="×{n}", zh="×{n} 次")

# ---- hash_chain -------------------------------------------------------------------------------------------

CHAIN_TITLE = Text(en="prefix caching: {n} tokens in blocks of {block_size}, each full block named by a chained hash",
                   zh="前缀缓存：{n} 个 token、每块 {block_size} 个，每个满块由链式哈希命名")
CHAIN_POSITIONS = Text(en="positions {first}–{last}", zh="位置 {first}–{last}")
CHAIN_HASH_OF = Text(en="h{i} = xxh64(h{prev} ‖ tokens)", zh="h{i} = xxh64(h{prev} ‖ 本块 token)")
CHAIN_FIRST_HASH = Text(en="h0 = xxh64(tokens)", zh="h0 = xxh64(本块 token)")
CHAIN_NO_HASH_YET = Text(en="no hash: {n} of {block_size} tokens,\nnamed once it is full",
                   zh="没有哈希：只有 {n}/{block_size} 个 token，\n填满后才命名")
CHAIN_NOTE = Text(en="each hash includes the one before it: equal hashes mean equal prefixes, so a block is "
                     "reused only when everything before it matches too",
                  zh="每个哈希都包含前一个哈希：哈希相等意味着前缀相等，所以只有前面的内容也全部一致时，一个块才会被复用")

# ---- block_table_slots ------------------------------------------------------------------------------------

SLOTS_TITLE = Text(en="paged KV cache: where the K/V of position {pos} goes", zh="分页 KV 缓存：位置 {pos} 的 K/V 写到哪里")
SLOTS_TITLE_SEQ = Text(en="paged KV cache: where the K/V of seq {seq_id}'s position {pos} goes",
                       zh="分页 KV 缓存：序列 {seq_id} 位置 {pos} 的 K/V 写到哪里")
SLOTS_POSITIONS = Text(en="the sequence's\ntoken positions", zh="序列的\ntoken 位置")
SLOTS_TABLE = Text(en="its block table", zh="它的块表")
SLOTS_POOL = Text(en="the block pool\n({n} blocks)", zh="块池\n（共 {n} 块）")
SLOTS_OF = Text(en="block {block}'s slots\n(offset 0…{last})", zh="第 {block} 块的槽位\n（偏移 0…{last}）")
SLOTS_WORKED = Text(en="position {pos}: logical block {pos} // {bs} = {j}, offset {pos} % {bs} = {offset}; "
                 "block_table[{j}] = {block}",
              zh="位置 {pos}：逻辑块 {pos} // {bs} = {j}，偏移 {pos} % {bs} = {offset}；block_table[{j}] = {block}")
SLOTS_SUM = Text(en="slot = block_id × block_size + offset = {block} × {bs} + {offset} = {slot}",
                zh="槽位 = block_id × block_size + 偏移 = {block} × {bs} + {offset} = {slot}")
SLOTS_OTHER_BLOCKS = Text(en="other sequences' or free blocks", zh="其他序列的块或空闲块")

# ---- memory_budget ----------------------------------------------------------------------------------------

BUDGET_TITLE = Text(en="the KV cache on {device}: {num_blocks} blocks of {block}",
                    zh="{device} 上的 KV 缓存：{num_blocks} 个块，每块 {block}")
BUDGET_MEMORY_BAR = Text(en="all of the memory:\n{total}", zh="全部内存：\n{total}")
BUDGET_SEGMENT = {
    "used": Text(en="used (everything, at the reading): {size}", zh="已用（所有程序，读数时）：{size}"),
    "warmup": Text(en="warm-up peak above resident (peak − current): {size}",
                   zh="预热峰值超出常驻的部分（peak − current）：{size}"),
    "available": Text(en="left for the KV cache: {size}", zh="留给 KV 缓存：{size}"),
    "kept": Text(en="kept back (1 − utilization {utilization}): {size}", zh="预留不用（1 − utilization {utilization}）：{size}"),
}
BUDGET_SHARE = Text(en="the engine's share = total × utilization = {total} × {utilization} = {share}",
             zh="引擎的份额 = total × utilization = {total} × {utilization} = {share}")
BUDGET_AVAILABLE = Text(en="available = share − used − (peak − current) = {share} − {used} − {extra} = {available}",
                 zh="可用 = 份额 − used − (peak − current) = {share} − {used} − {extra} = {available}")
BUDGET_CANDIDATES = Text(en="what each limit allows, in blocks of {block}", zh="各个限制各允许多少块（每块 {block}）")
BUDGET_LIMIT = {
    "memory": Text(en="the memory formula\n{size} // {block}\n= {blocks} blocks", zh="内存公式\n{size} // {block}\n= {blocks} 块"),
    "cpu_kvcache_gib": Text(en="the cpu_kvcache_gib cap\n{size} // {block}\n= {blocks} blocks",
                            zh="cpu_kvcache_gib 上限\n{size} // {block}\n= {blocks} 块"),
    "num_kvcache_blocks": Text(en="num_kvcache_blocks given\n\n{blocks} blocks", zh="给定的 num_kvcache_blocks\n\n{blocks} 块"),
}
BUDGET_NO_CAP = Text(en="no cap on a GPU", zh="GPU 上没有上限")
BUDGET_NOT_GIVEN = Text(en="num_kvcache_blocks not given", zh="没有给出 num_kvcache_blocks")
BUDGET_DECIDED = Text(en="decided", zh="由它决定")
BUDGET_RESULT = Text(en="num_blocks = {blocks}\nKV cache = {blocks} × {block}\n= {size}",
              zh="num_blocks = {blocks}\nKV 缓存 = {blocks} × {block}\n= {size}")
BUDGET_BLOCK_BYTES = Text(en="one block = 2 (K and V) × {layers} layers × {block_size} tokens × {kv_heads} KV heads × "
                      "{head_dim} head_dim × {dtype_bytes} bytes = {block}",
                   zh="一个块 = 2（K 和 V）× {layers} 层 × {block_size} 个 token × {kv_heads} 个 KV 头 × "
                      "{head_dim} head_dim × {dtype_bytes} 字节 = {block}")

# ---- decoder_layer ----------------------------------------------------------------------------------------

DECODER_TITLE = Text(en="one Qwen3 decoder layer{name}: T = {tokens} tokens, hidden {hidden}, {heads} query heads and "
                      "{kv_heads} KV heads of {head_dim}, MLP {inter}",
                   zh="一个 Qwen3 解码器层{name}：T = {tokens} 个 token，hidden {hidden}，{heads} 个 query 头、"
                      "{kv_heads} 个 KV 头，每头 {head_dim}，MLP {inter}")
DECODER_ATTENTION = Text(en="attention", zh="注意力")
DECODER_MLP = Text(en="MLP", zh="MLP 前馈")
DECODER_INPUT = Text(en="from the layer before: hidden_states, residual", zh="来自上一层：hidden_states、residual")
DECODER_OUTPUT = Text(en="to the next layer: hidden_states, residual", zh="交给下一层：hidden_states、residual")
DECODER_STAGE = {
    "input_layernorm": Text(en="adds the residual, then normalises", zh="先加上 residual，再归一化"),
    "qkv_proj": Text(en="q, k and v in one matrix multiply", zh="一次矩阵乘法算出 q、k、v"),
    "split": Text(en="view as heads, split into q | k | v", zh="按头重排，拆成 q | k | v"),
    "qk_norm": Text(en="RMSNorm over each query and key head", zh="对每个 query 头和 key 头做 RMSNorm"),
    "rope": Text(en="rotate q and k by their positions", zh="按位置旋转 q 和 k"),
    "store": Text(en="write k, v to the slots of slot_mapping", zh="把 k、v 写入 slot_mapping 指定的槽位"),
    "attention": Text(en="each KV head serves {group} query heads", zh="每个 KV 头服务 {group} 个 query 头"),
    "o_proj": Text(en="heads back to the hidden size", zh="把各头变回 hidden 维度"),
    "post_attention_layernorm": Text(en="adds the attention's output to the residual, then normalises",
                                     zh="把注意力的输出加到 residual 上，再归一化"),
    "gate_up_proj": Text(en="gate and up in one matrix multiply", zh="一次矩阵乘法算出 gate 和 up"),
    "act": Text(en="SiLU(gate) × up, elementwise", zh="SiLU(gate) × up，逐元素相乘"),
    "down_proj": Text(en="back to the hidden size", zh="变回 hidden 维度"),
}
DECODER_CACHE = Text(en="this layer's paged\nKV cache: k_cache,\nv_cache, each\n{shape}", zh="本层的分页 KV 缓存：\nk_cache 和 v_cache，\n形状都是\n{shape}")
DECODER_RESIDUAL = Text(en="residual (added inside the next RMSNorm)", zh="residual（在下一个 RMSNorm 里相加）")

# ---- tensor_parallel_splits -------------------------------------------------------------------------------

TP_TITLE = Text(en="tensor parallelism over {tp} ranks{name}: what each rank holds, and where the ranks talk",
                zh="{tp} 个 rank 的张量并行{name}：每个 rank 持有什么，rank 之间在哪里通信")
TP_HEAD = {"weight": Text(en="weight", zh="权重"), "split": Text(en="how it splits", zh="怎么切"),
           "shapes": Text(en="shape: whole → on each rank", zh="形状：完整 → 每个 rank"),
           "talk": Text(en="then", zh="之后")}
TP_SPLIT = {
    "vocab": Text(en="vocabulary-parallel:\nrank r owns ids [r·V/N, (r+1)·V/N)", zh="按词表并行：\nrank r 拥有 id [r·V/N, (r+1)·V/N)"),
    "qkv": Text(en="column-parallel: each rank\nits whole q heads and KV heads", zh="列并行：每个 rank 拿\n自己那几个完整的 q 头和 KV 头"),
    "attention": Text(en="this rank's heads only,\nits own shard of the KV cache", zh="只算本 rank 的头，\n读写自己那份 KV 缓存"),
    "row": Text(en="row-parallel: each rank its\nslice of the input features", zh="行并行：每个 rank 拿\n输入特征中的一段"),
    "gate_up": Text(en="column-parallel: each rank\nits slice of gate and of up", zh="列并行：每个 rank 拿\ngate 和 up 各自的一段"),
    "act": Text(en="elementwise, on the local slice", zh="逐元素，作用在本地那一段上"),
    "replicated": Text(en="replicated: every rank\nholds it whole", zh="复制：每个 rank\n都持有完整的一份"),
}
TP_HEADS_OF_RANK = Text(en="rank {rank}: q heads {q}, KV heads {kv}", zh="rank {rank}：q 头 {q}，KV 头 {kv}")
TP_PER_LAYER = Text(en="× {layers} decoder layers", zh="× {layers} 个解码器层")
TP_ALL_REDUCE = Text(en="all-reduce (sum)", zh="all-reduce（求和）")
TP_GATHER = Text(en="gather to rank 0\n(the only rank that samples)", zh="gather 到 rank 0\n（只有它负责采样）")
TP_NO_TALK = Text(en="no communication", zh="不通信")
TP_COUNT = Text(en="one forward pass: {n} all-reduces (1 after the embedding + 2 × {layers} layers) and 1 gather",
                zh="一次前向计算：{n} 次 all-reduce（词嵌入之后 1 次 + 2 × {layers} 层）和 1 次 gather")
