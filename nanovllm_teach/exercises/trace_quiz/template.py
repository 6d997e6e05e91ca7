"""Exercise ``trace_quiz`` — reading a trace.

A trace is the whole story of a run: every decision the engine took, as TEACHING events, and the tables
derived from them (``trace.steps``: one ``StepRow`` per engine step; ``trace.requests``: one ``RequestRow``
per request; ``trace.events``: everything). This quiz asks about one recorded run: 8 requests arriving over
12 steps into a KV cache of 20 blocks of 4 tokens, at most 4 sequences per step.

Get the trace and look at it (in a notebook, or ``python -i``)::

    from nanovllm_teach.exercises.quiz_grading import quiz_trace
    from nanovllm_teach.trace import format_request_table, format_step_table
    trace = quiz_trace()
    print(format_step_table(trace.steps)); print(format_request_table(trace.requests))

Answer each question with an int, under its key:

- ``num_steps``: how many engine steps did the run take?
- ``num_decode_steps``: how many of those steps were decode steps?
- ``max_decode_batch``: what was the largest batch a decode step ran?
- ``peak_used_blocks``: what is the largest number of KV blocks in use at the end of a step?
- ``first_preemption_step``: in which step was a sequence preempted for the first time?
- ``first_preempted_seq``: which seq_id was preempted first?
- ``num_preemptions``: how many preemptions happened in all?
- ``last_finish_step``: in which step did the last request finish?

Return the numbers you read off (``return {"num_steps": 42, ...}``), or compute them from ``trace`` — both
are reading the trace. Grade it: ``nanovllm-teach grade trace_quiz this_file.py``.
Stuck? ``hint("trace_quiz", 1)`` says where to look, ``hint("trace_quiz", 2)`` how.
"""

from __future__ import annotations

from nanovllm_teach.trace import Trace


def answer_quiz(trace: Trace) -> dict[str, int]:
    """Your answers, one int per question key."""
    raise NotImplementedError
