"""Execution layer (simulated): the errors a user reads when a simulation is asked for what it cannot run, in
English and Chinese (``say(NAME, field=value)`` where the error is raised): a model, a device, efficiency
factors, prices, a memory budget.

``published.py`` keeps its checks of the shipped ``published.json`` in English: only a maintainer adding a
measured case edits that file, and no command reads another one.

Pure data. Emits no events.
"""

from __future__ import annotations

from nanovllm_teach.i18n import Text

# The device and the settings that choose it.
UNKNOWN_HARDWARE = Text(en="unknown hardware {name!r}; known: {known}", zh="没有名为 {name!r} 的硬件；可选：{known}")
SIMULATED_NEEDS_HARDWARE = Text(en="runner='simulated' needs hardware: choose from {known}",
                                zh="runner='simulated' 需要指定 hardware：可选 {known}")
SIMULATED_NO_SUCH_HARDWARE = Text(en="runner='simulated' has no hardware {name!r}: choose from {known}",
                                  zh="runner='simulated' 没有名为 {name!r} 的 hardware：可选 {known}")
ENGINE_NEEDS_A_GPU = Text(en="serving_engine={engine!r} is a published engine's costs on a GPU; {device!r} is not one of "
                             "the GPUs",
                          zh="serving_engine={engine!r} 是公开测过的引擎在 GPU 上的开销；{device!r} 不是这里的 GPU")
FACTORS_OR_ENGINE = Text(en="give sim_factors or serving_engine, not both: a factors file holds every factor",
                         zh="sim_factors 和 serving_engine 只能给一个：系数文件里已经有全部系数")
BAD_SIM_FACTORS = Text(en="sim_factors {path!r} is not a JSON file of efficiency factors: {why}",
                       zh="sim_factors {path!r} 不是一个记录效率系数的 JSON 文件：{why}")

# Efficiency factors and their calibration.
FACTOR_NOT_A_SHARE = Text(en="efficiency factor {name} must be in (0, 1], got {value!r}",
                          zh="效率系数 {name} 必须在 (0, 1] 之内，收到的是 {value!r}")
MEMORY_FACTOR_OUT_OF_RANGE = Text(en="efficiency factor memory must be in (0, {most:g}], got {value!r}",
                                  zh="效率系数 memory 必须在 (0, {most:g}] 之内，收到的是 {value!r}")
FACTOR_NEGATIVE = Text(en="efficiency factor {name} must be >= 0, got {value!r}",
                       zh="效率系数 {name} 必须 >= 0，收到的是 {value!r}")
UNKNOWN_FACTORS = Text(en="unknown efficiency factor(s): {names}", zh="未知的效率系数：{names}")
ONE_TIME_PER_STEP = Text(en="need one measured time per step, got {steps} steps, {times} times",
                         zh="每一步需要一个实测时间，收到的是 {steps} 步、{times} 个时间")
CALIBRATION_NEEDS_A_CPU = Text(en="the calibration fits a CPU's host costs, not a {kind}'s ({name})",
                               zh="校准拟合的是 CPU 的主机端开销，不适用于 {kind}（{name}）")

# The model's shape.
MIXTURE_OF_EXPERTS = Text(
    en="{name} is a mixture-of-experts model ({model_type!r}, {experts}): each token runs through a few of its "
       "experts, chosen per token, which this cost model (every weight in every token's path) does not describe; "
       "give a dense decoder ({dense})",
    zh="{name} 是混合专家（MoE）模型（{model_type!r}，{experts}）：每个 token 只经过按 token 选出的少数几个专家，"
       "而这个代价模型假定每个 token 都经过全部权重，描述不了它；请给一个稠密的解码器模型（{dense}）")
NOT_A_DENSE_DECODER = Text(en="{name} is a {model_type!r} model; the simulator reads the shapes of dense decoders: "
                              "{dense}",
                           zh="{name} 是 {model_type!r} 模型；模拟器只读取稠密解码器模型的形状：{dense}")
CONFIG_MISSES_INTS = Text(en="{name}'s config.json has no positive int {missing}",
                          zh="{name} 的 config.json 中缺少正整数 {missing}")
NO_SUCH_MODEL = Text(en="model {name!r} is neither a shipped shape ({shapes}) nor a folder with a config.json",
                     zh="模型 {name!r} 既不是自带的形状（{shapes}），也不是含有 config.json 的文件夹")
CONFIG_NOT_JSON = Text(en="{path} cannot be read as JSON: {why}", zh="{path} 无法按 JSON 读取：{why}")
CONFIG_NOT_AN_OBJECT = Text(en="{path} is not a JSON object", zh="{path} 不是 JSON 对象")

# Memory: the device's and this machine's.
KV_BLOCKS_CANNOT_FIT = Text(
    en="num_kvcache_blocks={num_blocks} cannot fit: {device} holds at most {most} KV blocks of {block_size} tokens "
       "of {model} per rank (tp={tp}), even with no weights",
    zh="num_kvcache_blocks={num_blocks} 放不下：即使不放权重，{device} 每个 rank（tp={tp}）最多也只能容纳 {model} 的 "
       "{most} 个 KV 块（每块 {block_size} 个 token）")
NO_ROOM_FOR_KV_CACHE = Text(
    en="no memory left for the KV cache of {model} on {device} (tp={tp}): the runtime, weights and warm-up activations "
       "({num_seqs} x {seq_len} tokens) take {needed_gib:.3g} GiB of the {allowed_gib:.3g} GiB allowed, one block of "
       "{block_size} tokens needs {block_gib:.3g} GiB; raise gpu_memory_utilization or tensor_parallel_size, or "
       "lower max_num_batched_tokens, max_model_len or the block size",
    zh="{device}（tp={tp}）上已没有内存留给 {model} 的 KV 缓存：运行时、权重和预热激活值（{num_seqs} x {seq_len} 个 "
       "token）占去了允许的 {allowed_gib:.3g} GiB 中的 {needed_gib:.3g} GiB，而一个 {block_size} 个 token 的块需要 "
       "{block_gib:.3g} GiB；请调高 gpu_memory_utilization 或 tensor_parallel_size，或调低 "
       "max_num_batched_tokens、max_model_len 或块大小")
NO_BUDGET_FOR_KV_CACHE = Text(
    en="no memory left for the KV cache of {model} on {device}: budget {budget} bytes, one block needs {block_bytes}; "
       "raise gpu_memory_utilization or tensor_parallel_size, or lower max_num_batched_tokens",
    zh="{device} 上已没有内存留给 {model} 的 KV 缓存：预算 {budget} 字节，一个块需要 {block_bytes} 字节；"
       "请调高 gpu_memory_utilization 或 tensor_parallel_size，或调低 max_num_batched_tokens")
HOST_MEMORY_EXCEEDED = Text(
    en="this simulation would need about {total_gib:.3g} GiB of this machine's memory ({parts}), more than the "
       "{share_gib:.3g} GiB it can take of the {available_gib:.3g} GiB available: fewer requests, shorter lengths or "
       "fewer KV blocks",
    zh="这次模拟大约需要本机 {total_gib:.3g} GiB 内存（{parts}），超过了它在可用的 {available_gib:.3g} GiB 中"
       "能占用的 {share_gib:.3g} GiB：请减少请求、缩短长度或减少 KV 块")
HOST_PART_REQUESTS = Text(en="requests", zh="请求")
HOST_PART_PREFIXES = Text(en="shared prefixes", zh="共享前缀")
HOST_PART_BLOCKS = Text(en="KV block records", zh="KV 块记录")

# The simulated runner's sequences.
SEQUENCE_TOO_SHORT = Text(en="a sequence length must be an int >= 2 (a prompt and an answer), got {value!r}",
                          zh="序列长度必须是 >= 2 的整数（一个 prompt 加一个回答），收到的是 {value!r}")

# Prices, the user's own or the shipped table's.
BAD_PRICE = Text(en="{where}: the price of {name!r} must be a positive number of dollars per GPU-hour, got {value!r}",
                 zh="{where}：{name!r} 的价格必须是正数（每 GPU 小时多少美元），收到的是 {value!r}")
PRICES_NOT_JSON = Text(en="--prices {path}: not a readable JSON file: {why}",
                       zh="--prices {path}：不是可读取的 JSON 文件：{why}")
PRICES_NOT_AN_OBJECT = Text(en="--prices {path}: give a JSON object of GPU name -> dollars per GPU-hour",
                            zh="--prices {path}：请给出一个 JSON 对象，GPU 名称 -> 每 GPU 小时的美元价格")
BAD_PRICE_SPEC = Text(en="--price must be GPU=USD (dollars per GPU-hour), got {spec!r}",
                      zh="--price 的格式必须是 GPU=USD（每 GPU 小时的美元价格），收到的是 {spec!r}")
NO_FP8 = Text(
    en="{device} has no FP8 tensor cores, which quantization='fp8' (FP8 weights and activations: vLLM's "
       "--quantization fp8 on Ada Lovelace and Hopper) needs; choose one of {devices}. (vLLM runs FP8 weights on "
       "older GPUs as weight-only W8A16 with Marlin kernels, which the simulator does not model.)",
    zh="{device} 没有 FP8 Tensor Core，而 quantization='fp8'（权重和激活都用 FP8，即 vLLM 在 Ada Lovelace 和 Hopper "
       "上的 --quantization fp8）需要它；请从 {devices} 中选择。（在更早的 GPU 上，vLLM 用 Marlin 内核把 FP8 权重"
       "作为仅权重量化 W8A16 运行，模拟器没有对此建模。）")
