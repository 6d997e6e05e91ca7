"""Pictures: the errors a learner reads when a picture, the player or a replay page is asked for what it cannot
draw, in English and Chinese (``say(NAME, field=value)`` where the error is raised). The pictures' own words
are ``viz/words.py``'s.

Pure data. Emits no events.
"""

from __future__ import annotations

from nanovllm_teach.i18n import Text

IN_MEMORY = Text(en="(in memory)", zh="（内存中）")  # a trace's name when it was never a file

# A trace with nothing to show.
NO_STEP_TO_REPLAY = Text(en="trace {path} has no completed engine step to replay",
                         zh="trace {path} 中没有已完成的引擎步，无法回放")
NO_STEP_TO_REPORT = Text(en="trace {path} has no completed engine step to report",
                         zh="trace {path} 中没有已完成的引擎步，无法生成报告")
NO_STEP_TO_SUMMARIZE = Text(en="trace {path} has no completed engine step to summarize",
                            zh="trace {path} 中没有已完成的引擎步，无法汇总")
NO_STEP_TO_DRAW = Text(en="trace {path} has no completed engine step to draw",
                       zh="trace {path} 中没有已完成的引擎步，无法作图")
NO_STEP_TO_PLAY = Text(en="trace {path} has no completed engine step to play",
                       zh="trace {path} 中没有已完成的引擎步，无法播放")
NO_STEP_OR_REQUEST_TO_DRAW = Text(en="trace {path} has no completed step or no request to draw",
                                  zh="trace {path} 中没有已完成的步或没有请求，无法作图")
NO_REQUEST_TO_DRAW = Text(en="trace {path} has no request to draw", zh="trace {path} 中没有请求，无法作图")
RUN_ENDED_WITHOUT_A_STEP = Text(en="the run ended without completing an engine step: nothing to play",
                                zh="这次运行没有完成任何引擎步就结束了：没有可播放的内容")
NO_STEP_IN_TIME = Text(en="no engine step was recorded within {timeout_s} s",
                       zh="{timeout_s} 秒内没有录到任何引擎步")
NOT_A_REPLAY_PAGE = Text(en="not a replay page: no trace-data script element",
                         zh="这不是回放页面：没有 trace-data 这个 script 元素")

# The player and the pages.
BAD_VERBOSITY = Text(en="verbosity must be one of {choices}, got {value!r}",
                     zh="verbosity 必须是 {choices} 之一，收到的是 {value!r}")
BAD_LANG = Text(en="lang must be one of {choices}, got {value!r}", zh="lang 必须是 {choices} 之一，收到的是 {value!r}")
NOT_A_COMPLETED_STEP = Text(en="step {step} is not a completed step of this trace (steps {first}..{last})",
                            zh="第 {step} 步不是这个 trace 中已完成的步（步的范围：{first}..{last}）")
RECORDER_NOT_IN_MEMORY = Text(en="the recorder does not keep its events in memory (keep_in_memory=False): "
                                 "a player cannot follow it",
                              zh="这个记录器没有把事件保存在内存中（keep_in_memory=False）：播放器无法跟随它")
BAD_SOURCE = Text(en="source must be a TraceRecorder or a function returning a Trace, not {kind}",
                  zh="source 必须是 TraceRecorder 或返回 Trace 的函数，而不是 {kind}")

# The diagrams' arguments.
NOT_A_POSITIVE_INT = Text(en="{name} must be an int >= 1, got {value!r}", zh="{name} 必须是 >= 1 的整数，收到的是 {value!r}")
HEADS_NOT_A_MULTIPLE = Text(en="num_attention_heads={heads} is not a multiple of num_key_value_heads={kv_heads}",
                            zh="num_attention_heads={heads} 不是 num_key_value_heads={kv_heads} 的整数倍")
TP_TOO_SMALL = Text(en="tp_size must be an int >= 2 (one rank splits nothing), got {value!r}",
                    zh="tp_size 必须是 >= 2 的整数（只有一个 rank 时什么都不用切分），收到的是 {value!r}")
STEP_NOT_IN_TRACE = Text(en="step {step!r} is not in the trace (its steps: {span})",
                         zh="trace 中没有第 {step!r} 步（其中的步：{span}）")
NO_STEPS = Text(en="none", zh="无")
STEP_WITHOUT_TRACE = Text(en="step={step!r} was given without a trace to take its events from",
                          zh="给了 step={step!r}，却没有给出提供事件的 trace")
TRACE_WITHOUT_STEP = Text(en="a trace was given without a step: say which step's events to list (step=...)",
                          zh="给了 trace，却没有给出 step：请指明要列出哪一步的事件（step=...）")
NOT_A_STATE_EDGE = Text(en="STATE_TRANSITION {key!r} (event {event}) is no edge of the state machine",
                        zh="STATE_TRANSITION {key!r}（第 {event} 个事件）不是状态机中的一条边")
NOT_BUDGET_STATS = Text(en="not a KV_BUDGET_ESTIMATE's stats: {missing} missing",
                        zh="这不是 KV_BUDGET_ESTIMATE 的 stats：缺少 {missing}")
BAD_BLOCK_BYTES = Text(en="block_bytes must be >= 1, got {value!r}", zh="block_bytes 必须 >= 1，收到的是 {value!r}")
NO_TOKEN_IDS = Text(en="token_ids is empty: a prompt has at least one token",
                    zh="token_ids 为空：一个 prompt 至少有一个 token")
BAD_TOKEN_ID = Text(en="token ids must be ints >= 0, got {value!r}", zh="token id 必须是 >= 0 的整数，收到的是 {value!r}")
TOO_FEW_BLOCKS = Text(en="block_table {block_table!r} has {have} blocks; {num_tokens} tokens in blocks of {block_size} "
                         "need {needed}",
                      zh="block_table {block_table!r} 只有 {have} 个块；{num_tokens} 个 token 按每块 {block_size} "
                         "个 token 需要 {needed} 个块")
BAD_BLOCK_ID = Text(en="block ids must be ints >= 0, got {value!r} in {block_table!r}",
                    zh="块 id 必须是 >= 0 的整数，{block_table!r} 中有 {value!r}")
BAD_POSITION = Text(en="position must be in [0, {num_tokens}), got {value!r}",
                    zh="position 必须在 [0, {num_tokens}) 之内，收到的是 {value!r}")
TOO_FEW_KV_BLOCKS = Text(en="num_blocks={num_blocks!r} is too few for block id {largest} of the block table",
                         zh="num_blocks={num_blocks!r} 太少，容纳不下块表中的块 id {largest}")
# The replay page's progress bars, while it is built.
PAGE_GRID_PROGRESS = Text(en="page: block grid and queues", zh="页面：块网格和队列")
PAGE_LINES_PROGRESS = Text(en="page: TEACHING lines", zh="页面：TEACHING 行")
