"""The course's terms in English and Chinese: one glossary, which every Chinese text is held to.

Each ``Term`` gives the English words (the first is the term's name; the others are its other forms), the
Chinese term the field uses, and translations to avoid (wrong, or the field does not say them). The notebook
build's check (``i18n/notebooks.py``) and ``tests/test_i18n.py`` hold every pair of cells to it:

- where an English cell uses a term (outside code), its Chinese cell uses the Chinese term;
- no Chinese text uses an avoided translation;
- in each notebook, the first time the Chinese term appears, the English term follows it in brackets:
  预填充（prefill）.

Pure Python. Emits no events.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Term:
    en: tuple[str, ...]  # the term and its other English forms, lower case
    zh: str
    avoid: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return self.en[0]

    def in_english(self, text: str) -> bool:
        return any(re.search(rf"(?<![\w-]){re.escape(form)}(?![\w-])", text, re.IGNORECASE) for form in self.en)


TERMS: tuple[Term, ...] = (
    Term(("prefill", "prefills", "prefilled", "prefilling"), "预填充", ("预填写", "预先填充", "预充")),
    Term(("decode", "decodes", "decoding"), "解码", ("译码",)),
    Term(("continuous batching",), "连续批处理", ("持续批处理", "连续批量")),
    Term(("static batching",), "静态批处理", ("静态批量",)),
    Term(("paged kv cache",), "分页 KV 缓存", ("页式 KV", "分页式")),
    Term(("kv cache",), "KV 缓存", ("KV 快取", "键值缓存")),
    Term(("prefix caching", "prefix cache"), "前缀缓存", ("前缀快取", "前置缓存")),
    Term(("chunked prefill",), "分块预填充", ("分段预填充", "块状预填充")),
    Term(("preemption", "preempted", "preempts"), "抢占", ("抢先", "先占", "强占")),
    Term(("tensor parallelism", "tensor-parallel"), "张量并行", ("张量平行", "张量并列")),
    Term(("cuda graph", "cuda graphs"), "CUDA Graph", ("CUDA 图",)),
    Term(("bucket", "buckets"), "档位", ("桶",)),  # a CUDA Graph's batch size; the metrics' histograms say "bucket" too
    Term(("scheduler",), "调度器", ("排程器", "调度程序")),
    Term(("block manager",), "块管理器", ("区块管理器",)),
    Term(("block table", "block tables"), "块表", ("区块表",)),
    Term(("slot mapping",), "槽位映射", ("插槽映射",)),
    Term(("reference count", "ref count"), "引用计数", ("参考计数",)),
    Term(("throughput",), "吞吐量", ("吞吐率",)),
    Term(("time to first token", "ttft"), "首 token 延迟", ("首字延迟",)),
    Term(("time per output token", "tpot"), "每个输出 token 的时间", ()),
    Term(("goodput",), "有效吞吐量", ("好吞吐",)),
    Term(("roofline",), "屋顶线", ("车顶线",)),
    Term(("warm-up",), "预热", ("暖机",)),
    Term(("sampler",), "采样器", ("抽样器",)),
    Term(("recompute",), "重计算", ("重新运算",)),
    Term(("workload", "workloads"), "工作负载", ()),
    Term(("model runner",), "模型运行器", ()),
    # A GPU's launch of one kernel. The Chinese of the field also says 发射, which this course leaves to an
    # instruction's issue: one word for one thing.
    Term(("kernel launch", "kernel launches"), "kernel 启动", ("发射",)),
    Term(("nucleus sampling", "top-p sampling"), "核采样", ("nucleus 采样",)),
    # Two different points on two different curves: the roofline's ridge (where a processor stops waiting on
    # memory and starts waiting on arithmetic) and the latency curve's knee (where queueing takes over).
    Term(("ridge point",), "脊点", ("屋脊点",)),
    Term(("knee",), "拐点", ("膝点", "转折点")),
)


def term(name: str) -> Term:
    """The glossary's entry for the English ``name``."""
    for entry in TERMS:
        if entry.name == name:
            return entry
    raise KeyError(f"the glossary has no term {name!r}")
