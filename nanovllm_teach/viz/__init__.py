"""Pictures of traces: matplotlib timelines and (in a notebook) the step-through player.

Like ``nanovllm_teach.trace``, nothing here imports torch: a trace replays on a machine without it.
"""

from nanovllm_teach.viz.timeline import plot_timelines

__all__ = ["plot_timelines"]
