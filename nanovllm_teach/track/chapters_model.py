"""The build-it-yourself track's chapters 1-5: the model path (norms, rotary embedding, attention, the Qwen3
block and model, the sampler).

Role: teaching (the track). Pure data; emits no events.
"""

from __future__ import annotations

from nanovllm_teach.i18n import Text
from nanovllm_teach.track.seams import PACKAGE, Chapter, Seam

MODEL_CHAPTERS: tuple[Chapter, ...] = (
    Chapter(1, "norms", Text(en="RMSNorm and SiLU-and-mul", zh="RMSNorm 与 SiLU-and-mul"),
            f"{PACKAGE}/layers/norms.py", (
                Seam("nanovllm_teach.layers.layernorm:rms_norm", Text(
                    en="x: (..., hidden). Divide x by the root mean square of its last dimension, sqrt(mean(x**2) "
                       "+ eps), computed in float32; cast back to x's dtype, then multiply by weight (hidden,). "
                       "Same shape and dtype as x.",
                    zh="x：(..., hidden)。用 float32 计算 x 最后一维的均方根 sqrt(mean(x**2) + eps)，x 除以它；"
                       "转回 x 的 dtype，再乘以 weight（形状 (hidden,)）。返回与 x 同形状、同 dtype。")),
                Seam("nanovllm_teach.layers.activation:silu_and_mul", Text(
                    en="x: (..., 2 * intermediate), the packed gate and up projections side by side. Return "
                       "silu(gate) * up, (..., intermediate).",
                    zh="x：(..., 2 * intermediate)，gate 与 up 两个投影并排打包在一起。返回 silu(gate) * up，"
                       "形状 (..., intermediate)。")),
            ), notebook="16_build_norms"),
    Chapter(2, "rope", Text(en="The rotary position embedding", zh="旋转位置编码（RoPE）"),
            f"{PACKAGE}/layers/rotary.py", (
                Seam("nanovllm_teach.layers.rotary_embedding:cos_sin_table", Text(
                    en="Pair i of a head (elements i and i + head_dim/2) turns by position * base**(-2i/head_dim). "
                       "Return (max_position, 2, head_dim) float32: row [p, 0] is [cos | cos] and row [p, 1] is "
                       "[-sin | sin] of position p's head_dim/2 angles.",
                    zh="一个注意力头的第 i 对元素（第 i 与第 i + head_dim/2 个）旋转 position * base**(-2i/head_dim)。"
                       "返回 (max_position, 2, head_dim) 的 float32 张量：[p, 0] 行是位置 p 的 head_dim/2 个角度的 "
                       "[cos | cos]，[p, 1] 行是 [-sin | sin]。")),
                Seam("nanovllm_teach.layers.rotary_embedding:apply_rotary", Text(
                    en="x: (tokens, heads, head_dim); cos, sin: (tokens, 1, head_dim), rows of the table above. "
                       "Rotate each pair (x1[i], x2[i]) of the two halves of every head: [x1 cos - x2 sin | "
                       "x2 cos + x1 sin], computed in float32, returned in x's dtype.",
                    zh="x：(tokens, heads, head_dim)；cos、sin：(tokens, 1, head_dim)，取自上面那张表。把每个头前后两半"
                       "的每一对 (x1[i], x2[i]) 旋转：[x1 cos - x2 sin | x2 cos + x1 sin]，用 float32 计算，"
                       "以 x 的 dtype 返回。")),
            ), notebook="17_build_rope"),
    Chapter(3, "attention", Text(en="Attention with GQA, causal prefill", zh="GQA 注意力与因果预填充"),
            f"{PACKAGE}/layers/attention.py", (
                Seam("nanovllm_teach.layers.attention_torch:attend", Text(
                    en="One sequence. q: (len_q, heads, head_dim); k, v: (len_k, kv_heads, head_dim), heads a "
                       "multiple of kv_heads: query head h reads K/V head h // (heads // kv_heads) (GQA). "
                       "softmax(q k^T * scale) v per head; is_causal: query j sees keys 0..j; else mask (len_q, "
                       "len_k) of booleans, True where a query sees a key, or None. Return (len_q, heads, head_dim).",
                    zh="一条序列。q：(len_q, heads, head_dim)；k、v：(len_k, kv_heads, head_dim)，heads 是 kv_heads "
                       "的整数倍：第 h 个查询头读第 h // (heads // kv_heads) 个 K/V 头（GQA）。每个头算 "
                       "softmax(q k^T * scale) v；is_causal 时第 j 个查询只看第 0..j 个键；否则 mask 是 (len_q, len_k) "
                       "的布尔矩阵，True 表示该查询能看到该键，或为 None。返回 (len_q, heads, head_dim)。")),
                Seam("nanovllm_teach.layers.attention_torch:causal_prefill", Text(
                    en="The prefill of a batch, without a cached prefix: sequence i is rows cu_seqlens[i]:"
                       "cu_seqlens[i + 1] of q (tokens, heads, head_dim), k and v (tokens, kv_heads, head_dim). "
                       "Each token attends causally within its own sequence only. Return (tokens, heads, head_dim).",
                    zh="一批序列的预填充（没有已缓存的前缀）：第 i 条序列是 q (tokens, heads, head_dim)、k 和 v "
                       "(tokens, kv_heads, head_dim) 的第 cu_seqlens[i]:cu_seqlens[i + 1] 行。每个 token 只在自己"
                       "所在的序列内做因果注意力。返回 (tokens, heads, head_dim)。")),
            ), notebook="18_build_attention"),
    Chapter(4, "qwen3", Text(en="The Qwen3 block and model", zh="Qwen3 的 decoder 层与整个模型"),
            f"{PACKAGE}/models/qwen3.py", (
                Seam("nanovllm_teach.models.qwen3:Qwen3Attention.project", Text(
                    en="hidden_states: (tokens, hidden). One multiply by the packed self.qkv_proj gives [q | k | v]; "
                       "view it as (tokens, heads + 2 * kv_heads, head_dim); normalise every q head with "
                       "self.q_norm and every k head with self.k_norm, rotate q and k by rope (cos, sin). Return "
                       "q (tokens, heads, head_dim), k and v (tokens, kv_heads, head_dim).",
                    zh="hidden_states：(tokens, hidden)。与打包的 self.qkv_proj 做一次乘法得到 [q | k | v]；把它看成 "
                       "(tokens, heads + 2 * kv_heads, head_dim)；每个 q 头用 self.q_norm、每个 k 头用 self.k_norm "
                       "归一化，再用 rope (cos, sin) 旋转 q 和 k。返回 q (tokens, heads, head_dim)，以及 k、v "
                       "(tokens, kv_heads, head_dim)。")),
                Seam("nanovllm_teach.models.qwen3:Qwen3DecoderLayer.forward", Text(
                    en="Pre-norm block. residual None (first layer): residual = hidden_states, normalised by "
                       "self.input_layernorm; else self.input_layernorm(hidden_states, residual) adds then "
                       "normalises. Then self.self_attn(rope, ...), self.post_attention_layernorm with the residual, "
                       "self.mlp. Return (the MLP's output, the residual): the next layer adds them.",
                    zh="前置归一化（pre-norm）的 decoder 层。residual 为 None（第一层）时：residual = hidden_states，再用 "
                       "self.input_layernorm 归一化；否则 self.input_layernorm(hidden_states, residual) 先相加再"
                       "归一化。然后依次是 self.self_attn(rope, ...)、带残差的 self.post_attention_layernorm、"
                       "self.mlp。返回 (MLP 的输出, 残差)：由下一层把它们相加。")),
                Seam("nanovllm_teach.models.qwen3:Qwen3Model.forward", Text(
                    en="input_ids, positions: (tokens,), a flattened batch. Embed (self.embed_tokens), look up the "
                       "step's cos/sin once (self.rotary_emb(positions)), run self.layers in order carrying the "
                       "residual, and end with self.norm(hidden_states, residual). Return (tokens, hidden).",
                    zh="input_ids、positions：(tokens,)，一个展平的批次。先做词嵌入（self.embed_tokens），整个 step 只"
                       "查一次 cos/sin（self.rotary_emb(positions)），按顺序运行 self.layers 并传递残差，最后是 "
                       "self.norm(hidden_states, residual)。返回 (tokens, hidden)。")),
                Seam("nanovllm_teach.models.loader:load_model", Text(
                    en="Fill every parameter of model from the *.safetensors files in path (safetensors' safe_open). "
                       "A checkpoint tensor whose name holds a key of model.packed_modules_mapping (q_proj, k_proj, "
                       "v_proj, gate_proj, up_proj) goes to the packed parameter it names, through that parameter's "
                       "weight_loader(param, tensor, shard_id); any other through weight_loader(param, tensor) when "
                       "it has one. Tied embeddings: lm_head.weight may have no parameter. Raise ValueError naming "
                       "a parameter left empty. Return a LoadReport.",
                    zh="用 path 中的 *.safetensors 文件（safetensors 的 safe_open）填满 model 的每个参数。名字里含有 "
                       "model.packed_modules_mapping 某个键（q_proj、k_proj、v_proj、gate_proj、up_proj）的张量，"
                       "放进它所指的打包参数，用该参数的 weight_loader(param, tensor, shard_id)；其余张量有 "
                       "weight_loader 时用 weight_loader(param, tensor)。共享词嵌入时 lm_head.weight 可以没有对应"
                       "参数。有参数没被填时抛出 ValueError 并写明它。返回一个 LoadReport。")),
            ), notebook="19_build_qwen3"),
    Chapter(5, "sampler", Text(en="The sampler", zh="采样器（sampler）"),
            f"{PACKAGE}/sampler.py", (
                Seam("nanovllm_teach.layers.sampler:keep_mask", Text(
                    en="scaled: (rows, vocab) logits already divided by the temperature. Return a boolean mask "
                       "of the candidates each row keeps after top-k (values tied with the k-th stay; 0: off), then "
                       "top-p (a candidate stays while those more likely than it hold less than p of the mass of "
                       "what is left; 1: off), then min-p (drop what is less than min_p times as likely as the "
                       "most likely left; 0: off), each row with its own filters.top_ks, top_ps, min_ps.",
                    zh="scaled：(rows, vocab)，已经除以温度（temperature）的 logits。返回一个布尔掩码，表示每一行依次经过 "
                       "top-k（与第 k 大并列的值也保留；0 表示关闭）、top-p（只要比它更可能的候选所占的概率质量"
                       "还不到剩余质量的 p，它就保留；1 表示关闭）、min-p（去掉概率不到剩余候选中最大概率 min_p 倍的"
                       "候选；0 表示关闭）后留下哪些候选，每行用自己的 filters.top_ks、top_ps、min_ps。")),
                Seam("nanovllm_teach.layers.sampler:Sampler.forward", Text(
                    en="logits: (rows, vocab), the filtered ones set to -inf; temperatures: (rows,); seeds: one "
                       "int or None per row. Return (rows,) token ids: the argmax where the temperature is 0, "
                       "else a draw from softmax(logits / temperature). A row with a seed draws from its own "
                       "torch.Generator seeded with it: the same seed, the same token.",
                    zh="logits：(rows, vocab)，被过滤掉的候选已设为 -inf；temperatures：(rows,)；seeds：每行一个 int 或 "
                       "None。返回 (rows,) 个 token id：温度为 0 的行取 argmax，否则从 softmax(logits / temperature) "
                       "中抽样。带 seed 的行用以它为种子的 torch.Generator 抽样：同一个 seed，同一个 token。")),
            ), notebook="20_build_sampler"),
)
