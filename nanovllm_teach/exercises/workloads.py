"""How a graded workload is recorded, and what a grading child is forked from.

Role: grading. Emits no events (the engine it runs emits its own).

The step workloads several exercises share are course data (``nanovllm_teach.step_workloads``: the build
track checks on them too); a workload only one exercise runs lives in that exercise's folder.
"""

from __future__ import annotations

import sys
from pathlib import Path

from nanovllm_teach.runs import TimedWorkload, Workload, record_run
from nanovllm_teach.trace.recorder import TraceRecorder

# A graded workload is either kind: steps on the shipped model (trace equality), or requests in time on the
# simulated engine (the scheduling policy, graded by its metrics).
GradedWorkload = Workload | TimedWorkload


def record_graded(workload: GradedWorkload, path: Path, model: str | Path | None = None,
                  max_steps: int | None = None) -> None:
    """Run ``workload`` on the engine as it is now, writing its whole trace to ``path``."""
    # Every event with every tensor value: slot mappings are what some exercises are about.
    recorder = TraceRecorder(path, keep_in_memory=False, detail_decode_steps=sys.maxsize,
                             detail_max_elements=sys.maxsize)
    if isinstance(workload, TimedWorkload):
        workload.record(recorder)  # simulated: the model is the workload's own shape
    else:
        record_run(workload, recorder, model, max_steps=max_steps)


def warm_up() -> None:
    """Import, in this process, what starting the engine imports (torch, transformers and the engine), so
    that a grading child forked from it starts in a fraction of a second instead of seconds. Runs none of
    the engine's code, which a notebook may have patched."""
    import nanovllm_teach.llm  # noqa: F401 (for every child to come)
