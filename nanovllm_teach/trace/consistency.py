"""``check_consistency``: a trace cross-checked against itself; a clean trace gives an empty list.

Part of the torch-free trace layer. The block holders come from the one interpreter of events
(``state.walk``), the step and request rows from the tables; this module only compares.
"""

from __future__ import annotations

from nanovllm_teach.trace.reader import Trace
from nanovllm_teach.trace.state import ends_a_step, walk


def check_consistency(trace: Trace) -> list[str]:
    """Cross-check the trace against itself; each problem found is one sentence (empty list: consistent).

    - replaying the block events gives each step's ``used_blocks`` (and each block event's
      ``num_free_blocks``, and each BLOCK_FREE's ``freed_block_ids``);
    - each step's ``batch_size`` is the number of its ``seq_ids``;
    - each step's ``finished`` ids are the sequences that moved to FINISHED in it;
    - each finished request's token count (one per completed step that ran it, chunks excepted) equals the
      ``num_completion_tokens`` its FINISHED transition reports;
    - the steps between GENERATE_START and GENERATE_FINISH are as many as GENERATE_FINISH says;
    - the events are in the order a run writes them (``order_problems``).
    """
    problems: list[str] = order_problems(trace)
    total_blocks = next((e.stats.num_kvcache_blocks for e in trace.events_named("ENGINE_READY")), None)
    used_after_step: dict[int, int] = {}
    for e, state in walk(trace.events, trace.settings):
        s = e.stats
        if ends_a_step(e):
            used_after_step[e.step] = len(state.holders)
            continue
        if e.event not in ("BLOCK_ALLOCATE", "BLOCK_FREE"):
            continue
        if e.event == "BLOCK_FREE" and sorted(s.freed_block_ids) != sorted(state.emptied):
            problems.append(f"event {e.i}: BLOCK_FREE says blocks {sorted(s.freed_block_ids)} became "
                            f"free, the replay frees {sorted(state.emptied)}")
        if total_blocks is not None and s.num_free_blocks != total_blocks - len(state.holders):
            problems.append(f"event {e.i} ({e.event}): num_free_blocks={s.num_free_blocks}, the replay "
                            f"has {total_blocks - len(state.holders)} of {total_blocks} free")
    rows = trace.steps
    for row in rows:
        if used_after_step[row.step] != row.used_blocks:
            problems.append(f"step {row.step}: replaying the block events gives {used_after_step[row.step]} "
                            f"used blocks, STEP_DONE says {row.used_blocks}")
        if row.batch_size != len(row.seq_ids):
            problems.append(f"step {row.step}: batch_size={row.batch_size} but {len(row.seq_ids)} seq_ids")

    finished_by_step: dict[int, list[int]] = {}
    reported_tokens: dict[int, int] = {}
    for e in trace.events_named("STATE_TRANSITION"):
        if e.stats.to == "FINISHED" and e.step is not None:
            finished_by_step.setdefault(e.step, []).append(e.stats.seq_id)
            if e.reason != "aborted":
                reported_tokens[e.stats.seq_id] = e.stats.num_completion_tokens
    for row in rows:
        transitions = sorted(finished_by_step.get(row.step, []))
        if sorted(row.finished) != transitions:
            problems.append(f"step {row.step}: STEP_DONE.finished={sorted(row.finished)}, the FINISHED "
                            f"transitions in it are {transitions}")
    counted = {req.seq_id: req.num_completion_tokens for req in trace.requests}
    for sid, n in sorted(reported_tokens.items()):
        if counted.get(sid) != n:
            problems.append(f"seq {sid}: finished with num_completion_tokens={n}, the steps that ran it "
                            f"produced {counted.get(sid)}")

    window: list[str] | None = None
    for e in trace.events_named("STEP_DONE", "GENERATE_START", "GENERATE_FINISH"):
        if e.event == "GENERATE_START":
            window = []
        elif e.event == "STEP_DONE" and window is not None:
            window.append(e.phase)
        elif e.event == "GENERATE_FINISH" and window is not None:
            want = (e.stats.total_steps, e.stats.prefill_steps, e.stats.decode_steps)
            got = (len(window), window.count("prefill"), window.count("decode"))
            if want != got:
                problems.append(f"event {e.i}: GENERATE_FINISH reports (total, prefill, decode) steps {want}, "
                                f"the trace has {got} STEP_DONE events in that generate() call")
            window = None
    return problems


def order_problems(trace: Trace) -> list[str]:
    """Where the events are not in the order an engine writes them: the clock never goes back, each
    STEP_DONE's step is one more than the last one's, every event of step N comes after step N-1 ended, and
    each sequence's state transitions follow one another (WAITING from its REQUEST_ENQUEUE on). Only the
    first break of each rule is said, with how many more there are: one shuffled line breaks them all."""
    broken: dict[str, list[str]] = {}

    def note(rule: str, sentence: str) -> None:
        broken.setdefault(rule, []).append(sentence)

    last_t: int | None = None
    last_done: int | None = None  # the step of the last STEP_DONE
    state_of: dict[int, str] = {}  # each sequence's state after its last transition
    for e in trace.events:
        if last_t is not None and e.t_ns < last_t:
            note("clock", f"event {e.i} ({e.event}): its clock reads {e.t_ns} ns, before the {last_t} ns of "
                          f"the event ahead of it")
        last_t = e.t_ns
        if e.step is not None and last_done is not None and e.step != last_done + (0 if ends_a_step(e) else 1):
            if not ends_a_step(e):
                note("step", f"event {e.i} ({e.event}): it says step {e.step}, but step {last_done} ended "
                             f"just before it, so step {last_done + 1} is running")
        if ends_a_step(e):
            if last_done is not None and e.step != last_done + 1:
                note("steps", f"event {e.i}: STEP_DONE for step {e.step} after step {last_done}: "
                              f"steps are numbered one after another")
            last_done = e.step
        if e.event == "REQUEST_ENQUEUE":
            if e.stats.seq_id in state_of:
                note("seq", f"event {e.i}: seq {e.stats.seq_id} is enqueued a second time")
            state_of[e.stats.seq_id] = "WAITING"
        elif e.event == "STATE_TRANSITION":
            sid, before = e.stats.seq_id, state_of.get(e.stats.seq_id)
            if before is None:
                note("seq", f"event {e.i}: seq {sid} moves from {e.stats.from_} before it was enqueued")
            elif before != e.stats.from_:
                note("seq", f"event {e.i}: seq {sid} moves from {e.stats.from_} to {e.stats.to}, but it was "
                            f"{before}")
            state_of[sid] = e.stats.to
    return [sentences[0] + (f" (and {len(sentences) - 1} more like it)" if len(sentences) > 1 else "")
            for sentences in broken.values()]
