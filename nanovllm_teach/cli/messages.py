"""Command line: the errors ``simulate`` and ``plan`` refuse an option's value with, in English and Chinese
(``say(NAME, field=value)`` where the error is raised; ``cli.main`` prints it on one line, exit status 2). The
mistakes every command shares (a file that cannot be written, an unknown exercise) are ``cli/arguments.py``'s.

Pure data. Emits no events.
"""

from __future__ import annotations

from nanovllm_teach.i18n import Text

# simulate
BAD_SHARED_PREFIX = Text(en="--shared-prefix must be GROUPS:LEN (two ints), got {spec!r}",
                         zh="--shared-prefix 的格式必须是 GROUPS:LEN（两个整数），收到的是 {spec!r}")
TOO_MANY_PREFIX_GROUPS = Text(en="--shared-prefix {spec}: {groups} groups for {num_requests} requests "
                                 "(at most one each)",
                              zh="--shared-prefix {spec}：{num_requests} 个请求要分成 {groups} 组（组数不能超过请求数）")
PREFIX_TOO_LONG = Text(en="--shared-prefix {spec}: a prefix of {length} tokens leaves no room for a prompt and an "
                          "answer in max_model_len={max_model_len}",
                       zh="--shared-prefix {spec}：{length} 个 token 的前缀占满了 max_model_len={max_model_len}，"
                          "没有留给 prompt 和回答的位置")
LENGTHS_TOO_LONG = Text(en="{option} {spec} reaches {longest} tokens, more than the {most} that fit max_model_len",
                        zh="{option} {spec} 最长达到 {longest} 个 token，超过了 max_model_len 能容纳的 {most} 个")
ONE_ARRIVAL_OPTION = Text(en="give one of --rate, --arrivals or --concurrency",
                          zh="--rate、--arrivals 和 --concurrency 只能给其中一个")
BAD_CONCURRENCY = Text(en="--concurrency must be >= 1 (clients), got {value}",
                       zh="--concurrency 必须 >= 1（客户端的个数），收到的是 {value}")
BAD_ADMIT_EVERY = Text(en="--admit-every must be in 1..1024 (steps between admissions), got {value}",
                       zh="--admit-every 必须在 1..1024 之内（两次接纳新请求之间隔几步），收到的是 {value}")
OUT_IS_A_FOLDER = Text(en="--out {path} is a folder: give the trace's file name (e.g. sim.jsonl)",
                       zh="--out {path} 是文件夹：请给出 trace 的文件名（例如 sim.jsonl）")

# plan
NOT_INTS = Text(en="{option} must be comma-separated ints, got {spec!r}",
                zh="{option} 必须是用逗号分隔的整数，收到的是 {spec!r}")
NOT_DISTINCT_INTS = Text(en="{option} must list distinct ints >= 1, got {spec!r}",
                         zh="{option} 必须列出互不相同、>= 1 的整数，收到的是 {spec!r}")
UNKNOWN_GPU = Text(en="--gpus: unknown GPU {gpu!r}; choose from {gpus}", zh="--gpus：没有名为 {gpu!r} 的 GPU；可选：{gpus}")
GPU_WITHOUT_PRICE = Text(en="--gpus: {gpu} has no price per hour (it is not rented by the hour): give one with "
                            "--price {gpu}=USD",
                         zh="--gpus：{gpu} 没有每小时的价格（它不按小时出租）：请用 --price {gpu}=USD 给出一个")
BAD_TARGET_RATE = Text(en="--rate must be a target rate > 0 (requests per second), got {value}",
                       zh="--rate 必须是 > 0 的目标速率（每秒请求数），收到的是 {value}")
PLAN_OUT_SUFFIX = Text(en="--out {path}: the format follows the suffix; use .json or .csv",
                       zh="--out {path}：文件格式由后缀决定；请用 .json 或 .csv")
NO_FP8_CANDIDATE = Text(en="--quantization {spec}: none of --gpus ({gpus}) has FP8 tensor cores; those that do: {fp8}",
                        zh="--quantization {spec}：--gpus 中（{gpus}）没有一块有 FP8 Tensor Core；有的是：{fp8}")
BAD_QUANTIZATIONS = Text(en="--quantization must list distinct values of {choices}, got {spec}",
                         zh="--quantization 必须列出互不重复的取值，可选 {choices}，收到的是 {spec}")
