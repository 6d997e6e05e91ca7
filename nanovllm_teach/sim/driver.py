"""Orchestration (simulated): a time-based workload through the real ``Scheduler`` and ``BlockManager`` on a
``SimulatedRunner``, on the simulated clock.

The loop is the engine's own step (schedule → run → postprocess, then ``STEP_DONE``), with arrivals in
simulated seconds: before each step every request whose arrival time has passed is queued, and an idle
engine's clock jumps to the next arrival. A step's ``latency_ms`` is the runner's prediction; ``STEP_DONE``
also says which bound decided it (``bound``) and repeats the prediction as ``predicted_ms``.

The result keeps each request's arrival, first-token and finish times on the simulated clock, so TTFT,
TPOT and throughput come out without a trace; with a ``TraceRecorder`` the run is also a trace that the
replay tools read (its ``t_ns`` are the host's clock until the recorder can take the simulated one).

Emits: REQUEST_ENQUEUE, STEP_DONE (and, through the scheduler and the runner, everything else).
"""

from __future__ import annotations

from collections import Counter, deque
from dataclasses import dataclass, field

from nanovllm_teach.engine.scheduler import Scheduler
from nanovllm_teach.engine.sequence import Sequence
from nanovllm_teach.sampling_params import SamplingParams
from nanovllm_teach.sim.runner import SimulatedRunner
from nanovllm_teach.sim.workload import Request
from nanovllm_teach.trace.recorder import NullRecorder, Recorder


@dataclass
class RequestTimes:
    arrival_s: float
    num_prompt_tokens: int
    first_token_s: float | None = None
    finish_s: float | None = None
    num_output_tokens: int = 0
    finish_reason: str | None = None

    @property
    def ttft_s(self) -> float | None:
        return None if self.first_token_s is None else self.first_token_s - self.arrival_s

    @property
    def tpot_s(self) -> float | None:
        if self.finish_s is None or self.first_token_s is None or self.num_output_tokens < 2:
            return None
        return (self.finish_s - self.first_token_s) / (self.num_output_tokens - 1)


@dataclass
class SimulationResult:
    duration_s: float  # simulated seconds from the first arrival to the last token
    num_steps: int
    num_prefill_steps: int
    steps_by_bound: Counter
    requests: dict[int, RequestTimes] = field(default_factory=dict)
    num_preemptions: int = 0

    @property
    def output_tokens(self) -> int:
        return sum(r.num_output_tokens for r in self.requests.values())

    @property
    def output_tokens_per_s(self) -> float:
        return self.output_tokens / self.duration_s


def simulate(runner: SimulatedRunner, workload: list[Request], *, enable_prefix_caching: bool = True,
             scheduling_policy: str = "continuous", ignore_eos: bool = False,
             recorder: Recorder | None = None) -> SimulationResult:
    """Run ``workload`` to the end. ``ignore_eos``: every request runs to its ``max_tokens`` (finish reason
    ``length``, as in nano-vllm's benchmark) instead of stopping at EOS after ``output_len`` tokens."""
    rec = recorder or NullRecorder()
    scheduler = Scheduler(max_num_seqs=runner.max_num_seqs, max_num_batched_tokens=runner.max_num_batched_tokens,
                          max_model_len=runner.max_model_len, eos=runner.eos_token_id,
                          num_kvcache_blocks=runner.num_kvcache_blocks, block_size=runner.block_size,
                          enable_prefix_caching=enable_prefix_caching, policy=scheduling_policy, recorder=rec)
    clock = runner.clock
    t0 = clock.now_s  # arrival times count from here
    seqs = [_make_sequence(i, request, runner, ignore_eos) for i, request in enumerate(workload)]
    if not ignore_eos:  # only once every request is valid: a refused workload leaves the runner as it was
        for seq, request in zip(seqs, workload):
            runner.expect_output_len(seq.seq_id, request.output_len)
    pending = deque(sorted(zip(workload, seqs), key=lambda pair: pair[0].arrival_s))
    result = SimulationResult(0.0, 0, 0, Counter())
    first_arrival_s = t0 + (pending[0][0].arrival_s if pending else 0.0)
    while pending or not scheduler.is_finished():
        if scheduler.is_finished():
            clock.wait_until(t0 + pending[0][0].arrival_s)  # idle: nothing happens until someone arrives
        while pending and t0 + pending[0][0].arrival_s <= clock.now_s:
            request, seq = pending.popleft()
            scheduler.add(seq)
            result.requests[seq.seq_id] = RequestTimes(t0 + request.arrival_s, seq.num_prompt_tokens)
            rec.emit("REQUEST_ENQUEUE", "ingress", "new_request_waiting", seq_id=seq.seq_id,
                     prompt_len=seq.num_prompt_tokens, max_tokens=seq.max_tokens, temperature=seq.temperature,
                     ignore_eos=seq.ignore_eos, seed=seq.seed, waiting_len=len(scheduler.waiting))
        result.num_steps += 1
        rec.step = result.num_steps
        try:
            _step(scheduler, runner, result, rec)
        finally:
            rec.step = None
    result.duration_s = clock.now_s - first_arrival_s
    result.num_preemptions = sum(seq.num_preemptions for seq in seqs)
    return result


def _make_sequence(seq_id: int, request: Request, runner: SimulatedRunner, ignore_eos: bool) -> Sequence:
    """Validated as the engine validates a request, before anything runs. The request stops at its
    ``output_len`` (EOS) or its ``max_tokens``, whichever comes first."""
    prompt_len = len(request.prompt_token_ids)
    if not 1 <= prompt_len <= runner.max_model_len:
        raise ValueError(f"request {seq_id} has a {prompt_len}-token prompt; 1..max_model_len="
                         f"{runner.max_model_len} are allowed")
    max_tokens = request.max_tokens or request.output_len
    worst_case = min(prompt_len + max_tokens, runner.max_model_len)
    blocks_needed = -(-worst_case // runner.block_size)
    if blocks_needed > runner.num_kvcache_blocks:
        raise ValueError(f"request {seq_id} could never fit: {worst_case} tokens need {blocks_needed} KV "
                         f"blocks, the whole cache has {runner.num_kvcache_blocks}")
    params = SamplingParams(temperature=0.0, max_tokens=max_tokens, ignore_eos=ignore_eos)
    return Sequence(seq_id, request.prompt_token_ids, params, runner.block_size)


def _step(scheduler: Scheduler, runner: SimulatedRunner, result: SimulationResult, rec: Recorder) -> None:
    seqs, is_prefill = scheduler.schedule()
    num_batched_tokens = sum(seq.num_scheduled_tokens for seq in seqs)
    token_ids = runner.run(seqs, is_prefill)
    scheduler.postprocess(seqs, token_ids, is_prefill)
    cost = runner.last_cost
    now = runner.clock.now_s
    finished = []
    for seq in seqs:
        times = result.requests[seq.seq_id]
        if seq.num_completion_tokens > times.num_output_tokens:
            times.num_output_tokens = seq.num_completion_tokens
            if times.first_token_s is None:
                times.first_token_s = now
        if seq.is_finished:
            times.finish_s = now
            times.finish_reason = seq.finish_reason
            finished.append(seq.seq_id)
    result.steps_by_bound[cost.bound] += 1
    result.num_prefill_steps += is_prefill
    num_tokens = sum(len(seq) for seq in seqs) if is_prefill else -len(seqs)
    bm = scheduler.block_manager
    phase = "prefill" if is_prefill else "decode"
    rec.emit("STEP_DONE", phase, "step_complete", phase=phase, latency_ms=round(cost.total_s * 1e3, 3),
             num_tokens_stat=num_tokens, num_batched_tokens=num_batched_tokens, batch_size=len(seqs),
             seq_ids=[s.seq_id for s in seqs], finished=finished,
             used_blocks=bm.num_blocks - bm.num_free_blocks, free_blocks=bm.num_free_blocks,
             waiting_len=len(scheduler.waiting), running_len=len(scheduler.running),
             predicted_ms=round(cost.total_s * 1e3, 3), bound=cost.bound)
