"""What the explanatory diagrams say, in English and Chinese: every title, band, arrow and note, in one place.

A diagram is drawn in the chosen language (``nanovllm_teach.i18n``): ``say(words.SCHEDULE)``. Class, method,
event and tensor names are code and stay as they are, in both languages, so they are not here.

No torch. Emits no events.
"""

from __future__ import annotations

from nanovllm_teach.i18n import Text

# ---- engine_layers ----------------------------------------------------------------------------------------

LAYERS_TITLE = Text(en="one LLMEngine.step(), through the engine's three layers",
                    zh="一次 LLMEngine.step() 穿过引擎的三层")
LAYERS_STEP_TITLE = Text(en="step {step} ({phase}): each event listed by the class whose work it reports",
                         zh="第 {step} 步（{phase}）：每个事件列在它所报告的那个类下面")
LAYER_NAME = {
    "orchestration": Text(en="orchestration", zh="编排层"),
    "resources": Text(en="resources", zh="资源层"),
    "execution": Text(en="execution", zh="执行层"),
}
LAYER_ROLE = {
    "orchestration": Text(en="prompts in, outputs out; the step loop; says every decision as a TEACHING event",
                          zh="接收 prompt、交回输出；驱动每一步；把每个决策写成 TEACHING 事件"),
    "resources": Text(en="who runs this step, which KV blocks each sequence holds: pure Python, no torch",
                      zh="这一步谁来运行、每个序列占哪些 KV 块：纯 Python，不用 torch"),
    "execution": Text(en="tensors: the flattened batch, slot mapping, forward pass, sampling",
                      zh="张量：展平的 batch、槽位映射、前向计算、采样"),
}
CLASS_ROLE = {
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
SCHEDULE = Text(en="① schedule()", zh="① schedule()\n调度")
RUN = Text(en="② run(batch) → token ids", zh="② run(batch) → 每个序列一个 token id")
POSTPROCESS = Text(en="③ postprocess()", zh="③ postprocess()\n后处理")
RECORDS = Text(en="decisions\n(records)", zh="决策\n（记录）")
HANDS_ON = Text(en="records", zh="记录")
TRACE = Text(en="the trace", zh="trace 记录")
TEACHING_EVENTS = Text(en="TEACHING\nevents", zh="TEACHING\n事件")
OWN_EVENTS = Text(en="ModelRunner's\nown events", zh="ModelRunner\n自己的事件")
NO_EVENTS = Text(en="(no event this step)", zh="（本步没有事件）")
PHASE = {"prefill": Text(en="prefill", zh="预填充"), "decode": Text(en="decode", zh="解码")}

# ---- sequence_states --------------------------------------------------------------------------------------

STATES_TITLE = Text(en="the life of a Sequence (SequenceStatus)", zh="一个 Sequence 的一生（SequenceStatus）")
STATES_COUNTED = Text(en="the life of a Sequence: how often each edge was taken in this trace ({n} requests)",
                      zh="一个 Sequence 的一生：这份 trace 中每条边走过几次（共 {n} 个请求）")
STATE_NOTE = {
    "WAITING": Text(en="in the waiting queue", zh="在等待队列中"),
    "RUNNING": Text(en="in the running batch,\nholding KV blocks", zh="在运行中的 batch 里，\n占着 KV 块"),
    "FINISHED": Text(en="left the engine,\nits blocks freed", zh="已离开引擎，\n块已释放"),
}
ENTER = Text(en="add_request()", zh="add_request() 加入")
ADMITTED = Text(en="admitted by schedule():\nits whole prompt prefilled", zh="被 schedule() 接纳：\n整个 prompt 完成预填充")
PREEMPTED = Text(en="preempted: no free KV block,\nrecomputed later", zh="被抢占：没有空闲 KV 块，\n之后重计算")
FINISHED_BY = Text(en="finished in postprocess():", zh="在 postprocess() 中结束：")
FINISH_REASON = {"eos": Text(en="EOS", zh="遇到 EOS"), "length": Text(en="max_tokens reached", zh="达到 max_tokens"),
                 "max_model_len": Text(en="max_model_len reached", zh="达到 max_model_len")}
ABORTED = Text(en="aborted (abort_request)", zh="被中止（abort_request）")
TIMES = Text(en="×{n}", zh="×{n} 次")

# ---- hash_chain -------------------------------------------------------------------------------------------

CHAIN_TITLE = Text(en="prefix caching: {n} tokens in blocks of {block_size}, each full block named by a chained hash",
                   zh="前缀缓存：{n} 个 token、每块 {block_size} 个，每个满块由链式哈希命名")
BLOCK_N = Text(en="block {i}", zh="第 {i} 块")
POSITIONS = Text(en="positions {first}–{last}", zh="位置 {first}–{last}")
HASH_OF = Text(en="h{i} = xxh64(h{prev} ‖ tokens)", zh="h{i} = xxh64(h{prev} ‖ 本块 token)")
FIRST_HASH = Text(en="h0 = xxh64(tokens)", zh="h0 = xxh64(本块 token)")
NO_HASH_YET = Text(en="no hash: {n} of {block_size} tokens,\nnamed once it is full",
                   zh="没有哈希：只有 {n}/{block_size} 个 token，\n填满后才命名")
CHAIN_NOTE = Text(en="each hash includes the one before it: equal hashes mean equal prefixes, so a block is "
                     "reused only when everything before it matches too",
                  zh="每个哈希都包含前一个哈希：哈希相等意味着前缀相等，所以只有前面的内容也全部一致时，一个块才会被复用")

# ---- block_table_slots ------------------------------------------------------------------------------------

SLOTS_TITLE = Text(en="paged KV cache: where the K/V of position {pos} goes", zh="分页 KV 缓存：位置 {pos} 的 K/V 写到哪里")
SLOTS_TITLE_SEQ = Text(en="paged KV cache: where the K/V of seq {seq_id}'s position {pos} goes",
                       zh="分页 KV 缓存：序列 {seq_id} 位置 {pos} 的 K/V 写到哪里")
LOGICAL = Text(en="the sequence's\ntoken positions", zh="序列的\ntoken 位置")
TABLE = Text(en="its block table", zh="它的块表")
POOL = Text(en="the block pool\n({n} blocks)", zh="块池\n（共 {n} 块）")
SLOTS_OF = Text(en="block {block}'s slots\n(offset 0…{last})", zh="第 {block} 块的槽位\n（偏移 0…{last}）")
WORKED = Text(en="position {pos}: logical block {pos} // {bs} = {j}, offset {pos} % {bs} = {offset}; "
                 "block_table[{j}] = {block}",
              zh="位置 {pos}：逻辑块 {pos} // {bs} = {j}，偏移 {pos} % {bs} = {offset}；block_table[{j}] = {block}")
SLOT_SUM = Text(en="slot = block_id × block_size + offset = {block} × {bs} + {offset} = {slot}",
                zh="槽位 = block_id × block_size + 偏移 = {block} × {bs} + {offset} = {slot}")
OTHER_BLOCKS = Text(en="other sequences' or free blocks", zh="其他序列的块或空闲块")

# ---- memory_budget ----------------------------------------------------------------------------------------

BUDGET_TITLE = Text(en="the KV cache on {device}: {num_blocks} blocks of {block}",
                    zh="{device} 上的 KV 缓存：{num_blocks} 个块，每块 {block}")
MEMORY_BAR = Text(en="all of the memory:\n{total}", zh="全部内存：\n{total}")
SEGMENT = {
    "used": Text(en="used (everything, at the reading): {size}", zh="已用（所有程序，读数时）：{size}"),
    "warmup": Text(en="warm-up peak above resident (peak − current): {size}",
                   zh="预热峰值超出常驻的部分（peak − current）：{size}"),
    "available": Text(en="left for the KV cache: {size}", zh="留给 KV 缓存：{size}"),
    "kept": Text(en="kept back (1 − utilization {utilization}): {size}", zh="预留不用（1 − utilization {utilization}）：{size}"),
}
SHARE = Text(en="the engine's share = total × utilization = {total} × {utilization} = {share}",
             zh="引擎的份额 = total × utilization = {total} × {utilization} = {share}")
AVAILABLE = Text(en="available = share − used − (peak − current) = {share} − {used} − {extra} = {available}",
                 zh="可用 = 份额 − used − (peak − current) = {share} − {used} − {extra} = {available}")
CANDIDATES = Text(en="what each limit allows, in blocks of {block}", zh="各个限制各允许多少块（每块 {block}）")
LIMIT = {
    "memory": Text(en="the memory formula\n{size} // {block}\n= {blocks} blocks", zh="内存公式\n{size} // {block}\n= {blocks} 块"),
    "cpu_kvcache_gib": Text(en="the cpu_kvcache_gib cap\n{size} // {block}\n= {blocks} blocks",
                            zh="cpu_kvcache_gib 上限\n{size} // {block}\n= {blocks} 块"),
    "num_kvcache_blocks": Text(en="num_kvcache_blocks given\n\n{blocks} blocks", zh="给定的 num_kvcache_blocks\n\n{blocks} 块"),
}
NO_CAP = Text(en="no cap on a GPU", zh="GPU 上没有上限")
NOT_GIVEN = Text(en="num_kvcache_blocks not given", zh="没有给出 num_kvcache_blocks")
DECIDED = Text(en="decided", zh="由它决定")
RESULT = Text(en="num_blocks = {blocks}\nKV cache = {blocks} × {block}\n= {size}",
              zh="num_blocks = {blocks}\nKV 缓存 = {blocks} × {block}\n= {size}")
BLOCK_BYTES = Text(en="one block = 2 (K and V) × {layers} layers × {block_size} tokens × {kv_heads} KV heads × "
                      "{head_dim} head_dim × {dtype_bytes} bytes = {block}",
                   zh="一个块 = 2（K 和 V）× {layers} 层 × {block_size} 个 token × {kv_heads} 个 KV 头 × "
                      "{head_dim} head_dim × {dtype_bytes} 字节 = {block}")

# ---- decoder_layer ----------------------------------------------------------------------------------------

LAYER_TITLE = Text(en="one Qwen3 decoder layer{name}: T = {tokens} tokens, hidden {hidden}, {heads} query heads and "
                      "{kv_heads} KV heads of {head_dim}, MLP {inter}",
                   zh="一个 Qwen3 解码器层{name}：T = {tokens} 个 token，hidden {hidden}，{heads} 个 query 头、"
                      "{kv_heads} 个 KV 头，每头 {head_dim}，MLP {inter}")
ATTENTION_HALF = Text(en="attention", zh="注意力")
MLP_HALF = Text(en="MLP", zh="MLP 前馈")
INPUT = Text(en="from the layer before: hidden_states, residual", zh="来自上一层：hidden_states、residual")
OUTPUT = Text(en="to the next layer: hidden_states, residual", zh="交给下一层：hidden_states、residual")
STAGE = {
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
CACHE = Text(en="this layer's paged\nKV cache: k_cache,\nv_cache, each\n{shape}", zh="本层的分页 KV 缓存：\nk_cache 和 v_cache，\n形状都是\n{shape}")
RESIDUAL = Text(en="residual (added inside the next RMSNorm)", zh="residual（在下一个 RMSNorm 里相加）")

# ---- tensor_parallel_splits -------------------------------------------------------------------------------

TP_TITLE = Text(en="tensor parallelism over {tp} ranks{name}: what each rank holds, and where the ranks talk",
                zh="{tp} 个 rank 的张量并行{name}：每个 rank 持有什么，rank 之间在哪里通信")
TP_HEAD = {"weight": Text(en="weight", zh="权重"), "split": Text(en="how it splits", zh="怎么切"),
           "shapes": Text(en="shape: whole → on each rank", zh="形状：完整 → 每个 rank"),
           "talk": Text(en="then", zh="之后")}
SPLIT = {
    "vocab": Text(en="vocabulary-parallel:\nrank r owns ids [r·V/N, (r+1)·V/N)", zh="按词表并行：\nrank r 拥有 id [r·V/N, (r+1)·V/N)"),
    "qkv": Text(en="column-parallel: each rank\nits whole q heads and KV heads", zh="列并行：每个 rank 拿\n自己那几个完整的 q 头和 KV 头"),
    "attention": Text(en="this rank's heads only,\nits own shard of the KV cache", zh="只算本 rank 的头，\n读写自己那份 KV 缓存"),
    "row": Text(en="row-parallel: each rank its\nslice of the input features", zh="行并行：每个 rank 拿\n输入特征中的一段"),
    "gate_up": Text(en="column-parallel: each rank\nits slice of gate and of up", zh="列并行：每个 rank 拿\ngate 和 up 各自的一段"),
    "act": Text(en="elementwise, on the local slice", zh="逐元素，作用在本地那一段上"),
    "replicated": Text(en="replicated: every rank\nholds it whole", zh="复制：每个 rank\n都持有完整的一份"),
}
HEADS_OF_RANK = Text(en="rank {rank}: q heads {q}, KV heads {kv}", zh="rank {rank}：q 头 {q}，KV 头 {kv}")
PER_LAYER = Text(en="× {layers} decoder layers", zh="× {layers} 个解码器层")
ALL_REDUCE = Text(en="all-reduce (sum)", zh="all-reduce（求和）")
GATHER = Text(en="gather to rank 0\n(the only rank that samples)", zh="gather 到 rank 0\n（只有它负责采样）")
NO_TALK = Text(en="no communication", zh="不通信")
TP_COUNT = Text(en="one forward pass: {n} all-reduces (1 after the embedding + 2 × {layers} layers) and 1 gather",
                zh="一次前向计算：{n} 次 all-reduce（词嵌入之后 1 次 + 2 × {layers} 层）和 1 次 gather")
