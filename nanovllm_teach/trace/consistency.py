"""``check_consistency``: a trace cross-checked against itself; a clean trace gives an empty list.

Each problem is one sentence in the chosen language (``i18n``).

Part of the torch-free trace layer. The block holders come from the one interpreter of events
(``state.walk``), the step and request rows from the tables; this module only compares.
"""

from __future__ import annotations

from nanovllm_teach.i18n import Text, say
from nanovllm_teach.trace.reader import Trace
from nanovllm_teach.trace.state import ends_a_step, walk

# Each problem in both languages (a trace handed to the CLI is refused with the first of them).
FREED_DIFFERS = Text(en="event {i}: BLOCK_FREE says blocks {said} became free, the replay frees {replayed}",
                     zh="事件 {i}：BLOCK_FREE 说块 {said} 变为空闲，重放得到的是 {replayed}")
FREE_COUNT_DIFFERS = Text(
    en="event {i} ({event}): num_free_blocks={said}, the replay has {replayed} of {total} free",
    zh="事件 {i}（{event}）：num_free_blocks={said}，重放得到 {total} 个块中有 {replayed} 个空闲")
USED_DIFFERS = Text(en="step {step}: replaying the block events gives {replayed} used blocks, STEP_DONE says {said}",
                    zh="第 {step} 步：重放块事件得到 {replayed} 个已用块，STEP_DONE 说是 {said} 个")
BATCH_SIZE_DIFFERS = Text(en="step {step}: batch_size={batch_size} but {n} seq_ids",
                          zh="第 {step} 步：batch_size={batch_size}，seq_ids 却有 {n} 个")
FINISHED_DIFFERS = Text(en="step {step}: STEP_DONE.finished={said}, the FINISHED transitions in it are {transitions}",
                        zh="第 {step} 步：STEP_DONE.finished={said}，而这一步里转为 FINISHED 的是 {transitions}")
TOKENS_DIFFER = Text(en="seq {seq_id}: finished with num_completion_tokens={said}, the steps that ran it produced {produced}",
                     zh="序列 {seq_id}：结束时 num_completion_tokens={said}，运行它的那些步产生了 {produced} 个")
GENERATE_STEPS_DIFFER = Text(
    en="event {i}: GENERATE_FINISH reports (total, prefill, decode) steps {said}, the trace has {got} STEP_DONE "
       "events in that generate() call",
    zh="事件 {i}：GENERATE_FINISH 报告的（总数、预填充、解码）步数是 {said}，这次 generate() 调用里的 STEP_DONE "
       "事件却是 {got}")
CLOCK_BACK = Text(en="event {i} ({event}): its clock reads {t_ns} ns, before the {before} ns of the event ahead of it",
                  zh="事件 {i}（{event}）：它的时钟是 {t_ns} ns，早于前一个事件的 {before} ns")
WRONG_STEP = Text(en="event {i} ({event}): it says step {step}, but that step ended before it",
                  zh="事件 {i}（{event}）：它说是第 {step} 步，可那一步在它之前就结束了")
STEP_GOES_BACK = Text(en="event {i} ({event}): it says step {step}, after an event of step {before}: steps do not go back",
                      zh="事件 {i}（{event}）：它说是第 {step} 步，却排在第 {before} 步的事件之后：步号不会倒退")
STEPS_NOT_IN_ORDER = Text(en="event {i}: STEP_DONE for step {step} after step {before} ended: each step ends once, "
                             "in order",
                          zh="事件 {i}：第 {before} 步结束之后又来了第 {step} 步的 STEP_DONE：每一步按顺序、只结束一次")
ENQUEUED_AGAIN = Text(en="event {i}: seq {seq_id} is enqueued a second time", zh="事件 {i}：序列 {seq_id} 第二次入队")
MOVES_BEFORE_ENQUEUE = Text(en="event {i}: seq {seq_id} moves from {state} before it was enqueued",
                            zh="事件 {i}：序列 {seq_id} 还没入队就从 {state} 转出")
MOVES_FROM_ELSEWHERE = Text(en="event {i}: seq {seq_id} moves from {frm} to {to}, but it was {was}",
                            zh="事件 {i}：序列 {seq_id} 从 {frm} 转到 {to}，可它当时是 {was}")
MORE_LIKE_IT = Text(en=" (and {n} more like it)", zh="（同类问题还有 {n} 处）")


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
            problems.append(say(FREED_DIFFERS, i=e.i, said=sorted(s.freed_block_ids), replayed=sorted(state.emptied)))
        if total_blocks is not None and s.num_free_blocks != total_blocks - len(state.holders):
            problems.append(say(FREE_COUNT_DIFFERS, i=e.i, event=e.event, said=s.num_free_blocks,
                                replayed=total_blocks - len(state.holders), total=total_blocks))
    rows = trace.steps
    for row in rows:
        if used_after_step[row.step] != row.used_blocks:
            problems.append(say(USED_DIFFERS, step=row.step, replayed=used_after_step[row.step], said=row.used_blocks))
        if row.batch_size != len(row.seq_ids):
            problems.append(say(BATCH_SIZE_DIFFERS, step=row.step, batch_size=row.batch_size, n=len(row.seq_ids)))

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
            problems.append(say(FINISHED_DIFFERS, step=row.step, said=sorted(row.finished), transitions=transitions))
    counted = {req.seq_id: req.num_completion_tokens for req in trace.requests}
    for sid, n in sorted(reported_tokens.items()):
        if counted.get(sid) != n:
            problems.append(say(TOKENS_DIFFER, seq_id=sid, said=n, produced=counted.get(sid)))

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
                problems.append(say(GENERATE_STEPS_DIFFER, i=e.i, said=want, got=got))
            window = None
    return problems


def order_problems(trace: Trace) -> list[str]:
    """Where the events are not in the order an engine writes them: the clock never goes back, step numbers
    never go back, every event of a step comes after the steps before it ended, each STEP_DONE ends a later
    step than the last one (a step rolled back after an exception has none, and the retry takes the next
    number), and each sequence's state transitions follow one another (WAITING from its REQUEST_ENQUEUE on).
    Only the first break of each rule is said, with how many more there are: one shuffled line breaks them
    all."""
    broken: dict[str, list[str]] = {}

    def note(rule: str, sentence: str) -> None:
        broken.setdefault(rule, []).append(sentence)

    last_t: int | None = None
    last_step: int | None = None  # the step of the last event that had one
    last_done: int | None = None  # the step of the last STEP_DONE
    state_of: dict[int, str] = {}  # each sequence's state after its last transition
    for e in trace.events:
        if last_t is not None and e.t_ns < last_t:
            note("clock", say(CLOCK_BACK, i=e.i, event=e.event, t_ns=e.t_ns, before=last_t))
        last_t = e.t_ns
        if e.step is not None:
            if last_step is not None and e.step < last_step:
                note("back", say(STEP_GOES_BACK, i=e.i, event=e.event, step=e.step, before=last_step))
            elif last_done is not None and e.step <= last_done:
                if ends_a_step(e):
                    note("steps", say(STEPS_NOT_IN_ORDER, i=e.i, step=e.step, before=last_done))
                else:
                    note("step", say(WRONG_STEP, i=e.i, event=e.event, step=e.step))
            last_step = e.step
            if ends_a_step(e):
                last_done = max(e.step, last_done if last_done is not None else e.step)
        if e.event == "REQUEST_ENQUEUE":
            if e.stats.seq_id in state_of:
                note("seq", say(ENQUEUED_AGAIN, i=e.i, seq_id=e.stats.seq_id))
            state_of[e.stats.seq_id] = "WAITING"
        elif e.event == "STATE_TRANSITION":
            sid, before = e.stats.seq_id, state_of.get(e.stats.seq_id)
            if before is None:
                note("seq", say(MOVES_BEFORE_ENQUEUE, i=e.i, seq_id=sid, state=e.stats.from_))
            elif before != e.stats.from_:
                note("seq", say(MOVES_FROM_ELSEWHERE, i=e.i, seq_id=sid, frm=e.stats.from_, to=e.stats.to, was=before))
            state_of[sid] = e.stats.to
    return [sentences[0] + (say(MORE_LIKE_IT, n=len(sentences) - 1) if len(sentences) > 1 else "")
            for sentences in broken.values()]
