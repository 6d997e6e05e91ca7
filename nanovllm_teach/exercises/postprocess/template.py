"""Exercise ``postprocess`` — after the model ran: cached K/V, new tokens, and when a request is finished.

The model runner has computed the step's batch and sampled one token per sequence. ``Scheduler.postprocess``
(``nanovllm_teach/engine/scheduler.py``) takes the result in: it is the last third of every engine step.

For each sequence of the batch, in order (``scheduler.accepted[entry.seq_id]`` is the sequence of the batch
entry ``entry``; ``token_ids`` has one token per entry):

1. Its K/V for the ``seq.num_scheduled_tokens`` tokens just computed is now in the cache: let the block
   manager name the blocks that became full (``bm.hash_blocks(seq)``, *before* anything else changes),
   then count those tokens as cached and nothing as scheduled any more.
2. If the sequence has still not computed its whole prompt, the step was a chunk of it: the sampled token
   means nothing and is dropped. Otherwise the token is appended (``seq.append_token``).
3. Then decide whether the sequence is finished, and why (``seq.finish_reason``), checking in this order:
   ``"eos"`` if the token is the end-of-sequence token ``scheduler.eos`` and the request does not ask to
   ignore it (``seq.ignore_eos``); ``"length"`` once it has ``seq.max_tokens`` completion tokens;
   ``"max_model_len"`` once it holds ``scheduler.max_model_len`` tokens.
4. A finished sequence leaves the engine: ``scheduler.finish(seq, reason)`` sets its state and reason,
   takes it out of ``scheduler.accepted`` and ``scheduler.running`` and gives its blocks back.

Return the batch's sequences in the batch's order. ``bm`` is ``scheduler.block_manager``.

Example: ``max_tokens=3``, ``ignore_eos=False``; the request has 2 completion tokens and samples the EOS
token: it finishes with ``"eos"``. The same request with ``ignore_eos=True`` finishes with ``"length"``:
the EOS token is kept as its third completion token.

Grade it: ``nanovllm-teach grade postprocess this_file.py``. The grader runs the real engine with your
function in place of ``Scheduler.postprocess`` and compares its decisions, as TEACHING
events, with the reference's.
Stuck? ``hint("postprocess", 1)`` says where to look, ``hint("postprocess", 2)`` how.
"""

from __future__ import annotations

from nanovllm_teach.engine.batch import ScheduledBatch
from nanovllm_teach.engine.scheduler import Scheduler
from nanovllm_teach.engine.sequence import Sequence


def postprocess(scheduler: Scheduler, batch: ScheduledBatch, token_ids: list[int]) -> list[Sequence]:
    """Take in one step's sampled tokens; returns the batch's sequences, in its order."""
    raise NotImplementedError
