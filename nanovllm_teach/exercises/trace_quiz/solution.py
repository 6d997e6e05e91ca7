"""Reference solution of ``trace_quiz``: every answer computed from the trace's tables and events."""

from __future__ import annotations

from nanovllm_teach.trace import Trace


def answer_quiz(trace: Trace) -> dict[str, int]:
    decode_rows = [row for row in trace.steps if row.phase == "decode"]
    first_preemption = next(row for row in trace.steps if row.preempted)
    return {
        "num_steps": len(trace.steps),
        "num_decode_steps": len(decode_rows),
        "max_decode_batch": max(row.batch_size for row in decode_rows),
        "peak_used_blocks": max(row.used_blocks for row in trace.steps),
        "first_preemption_step": first_preemption.step,
        "first_preempted_seq": first_preemption.preempted[0],
        "num_preemptions": sum(req.num_preemptions for req in trace.requests),
        "last_finish_step": max(req.finish_step for req in trace.requests),
    }
