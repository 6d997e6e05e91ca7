"""The deployment planner (orchestration): the errors a user reads when a plan is asked for what it cannot
search, in English and Chinese (``say(NAME, field=value)`` where the error is raised): the workload, the targets, a
recorded trace, the search's log, Ray.

Pure data. Emits no events.
"""

from __future__ import annotations

from nanovllm_teach.i18n import Text

# The workload a plan serves.
INT_TOO_SMALL = Text(en="{name} must be an int >= {least}, got {value!r}",
                     zh="{name} 必须是 >= {least} 的整数，收到的是 {value!r}")
TOO_FEW_PROBE_REQUESTS = Text(en="a probe measures at least {least} requests (fewer give a p99 of a handful), "
                                 "got {value}",
                              zh="一次探测至少要测 {least} 个请求（更少的话，p99 只是寥寥几个请求中的一个），收到的是 {value}")
RECORDED_REQUEST_TOO_LONG = Text(en="{source} holds a request of {longest} tokens (prompt and answer), more than "
                                    "max_model_len={max_model_len}",
                                 zh="{source} 中有一个 {longest} 个 token 的请求（prompt 加回答），超过了 "
                                    "max_model_len={max_model_len}")
LENGTHS_DO_NOT_FIT = Text(en="prompts of up to {prompt} and answers of up to {output} tokens do not fit "
                             "max_model_len={max_model_len}",
                          zh="最长 {prompt} 个 token 的 prompt 加上最长 {output} 个 token 的回答，超出了 "
                             "max_model_len={max_model_len}")

# The targets.
BAD_QUANTILE = Text(en="{name} must be one of {choices}, got {value!r}",
                    zh="{name} 必须是 {choices} 之一，收到的是 {value!r}")
BAD_GOODPUT = Text(en="goodput must be a share of requests in (0, 1], got {value!r}",
                   zh="goodput（有效吞吐量）必须是请求所占的比例，在 (0, 1] 之内，收到的是 {value!r}")
BAD_RESOLUTION = Text(en="resolution must be a share of the saturated rate in (0, 1), got {value!r}",
                      zh="resolution 必须是饱和速率的一个比例，在 (0, 1) 之内，收到的是 {value!r}")
NOT_A_DATASHEET_GPU = Text(en="plan needs a datasheet GPU ({gpus}), got {hardware!r}: this-cpu is measured, and would "
                              "differ from one machine of a cluster to the next",
                           zh="plan 需要一块有规格数据的 GPU（{gpus}），收到的是 {hardware!r}：this-cpu 是现场测出来的，"
                              "集群中每台机器测得的都会不同")

# A recorded trace as the workload (--workload-trace).
TRACE_UNREADABLE = Text(en="--workload-trace {path}: cannot be read ({why})", zh="--workload-trace {path}：无法读取（{why}）")
TRACE_TOO_LARGE = Text(en="--workload-trace {path}: {size} bytes, more than the {most} a workload's trace may have",
                       zh="--workload-trace {path}：{size} 字节，超过了工作负载 trace 允许的 {most} 字节")
TRACE_DAMAGED = Text(en="--workload-trace: {why}", zh="--workload-trace 无法使用：{why}")
TRACE_NOT_A_RUN = Text(en="--workload-trace {path}: its events do not make a run ({kind})",
                       zh="--workload-trace {path}：其中的事件构不成一次运行（{kind}）")
TRACE_TOO_FEW_REQUESTS = Text(en="--workload-trace {path}: {count} finished request(s); a workload needs at least 2",
                              zh="--workload-trace {path}：只有 {count} 个完成的请求；一个工作负载至少需要 2 个")
TRACE_NO_RATE = Text(en="--workload-trace {path}: every request arrived at the same moment, which gives no rate to "
                        "scale; plan it with --prompt-lens/--output-lens instead",
                     zh="--workload-trace {path}：所有请求都在同一时刻到达，得不出可以缩放的速率；"
                        "请改用 --prompt-lens/--output-lens 来规划")

# The search's log (--log) and Ray.
LOG_NOT_A_PLAN = Text(en="{path} is not a plan's log (its first line is not JSON): give another --log",
                      zh="{path} 不是 plan 的日志（第一行不是 JSON）：请换一个 --log")
LOG_OTHER_SETTINGS = Text(en="{path} holds a search with other settings ({differ} differ): give another --log, or "
                             "remove it to start again",
                          zh="{path} 记录的是另一组设置下的搜索（{differ} 不同）：请换一个 --log，或删掉它重新开始")
LOG_NOT_A_PROBE = Text(en="{path}, line {number}: not a probe of this search; remove the log to start again",
                       zh="{path} 第 {number} 行：不是这次搜索的探测记录；请删掉这个日志重新开始")
RAY_CLUSTER_DID_NOT_START = Text(
    en="the Ray cluster at {address} did not start: {why} (a local Ray gives its helper processes 15 s to start, "
       "which a machine this busy may not meet); run with --serial, or start a cluster (ray start --head) and pass "
       "--address",
    zh="{address} 上的 Ray 集群没有启动：{why}（本地 Ray 给它的辅助进程 15 秒启动时间，机器这么忙时可能来不及）；"
       "请加 --serial 运行，或者先启动一个集群（ray start --head）再传入 --address")
LOCAL_RAY_DID_NOT_START = Text(
    en="a local Ray did not start: {why} (a local Ray gives its helper processes 15 s to start, which a machine this "
       "busy may not meet); run with --serial, or start a cluster (ray start --head) and pass --address",
    zh="本地 Ray 没有启动：{why}（本地 Ray 给它的辅助进程 15 秒启动时间，机器这么忙时可能来不及）；"
       "请加 --serial 运行，或者先启动一个集群（ray start --head）再传入 --address")
LONGEST_DOES_NOT_FIT = Text(en="its longest request fits {longest} tokens, the workload's reaches {reaches}",
                            zh="它能容纳的最长请求是 {longest} 个 token，而工作负载中最长的达到 {reaches} 个")
