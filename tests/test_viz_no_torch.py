"""The pictures and the player need matplotlib (and ipywidgets), never torch: in a fresh interpreter where
importing torch or transformers fails, every module of ``nanovllm_teach.viz`` imports, and a recorded
trace (``data/small_trace.jsonl``) is drawn in every picture, played, reported and compared, and the CLI
replays it.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

TRACE = Path(__file__).resolve().parent / "data" / "small_trace.jsonl"

BLOCKER = """
import importlib.abc, sys
BLOCKED = ("torch", "transformers")

class Blocker(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ImportError(f"{name} is blocked: the viz layer must not need it")
        return None

sys.meta_path.insert(0, Blocker())
"""

DRAW = BLOCKER + """
import importlib, io, pkgutil, tempfile
from pathlib import Path
import nanovllm_teach.viz as viz

names = [m.name for m in pkgutil.walk_packages(viz.__path__, "nanovllm_teach.viz.")]
for name in names:
    importlib.import_module(name)
assert {"nanovllm_teach.viz.player", "nanovllm_teach.viz.blockgrid", "nanovllm_teach.viz.gantt"} <= set(names)

from nanovllm_teach.cli import main
from nanovllm_teach.trace import load_trace

trace = load_trace(sys.argv[1])
pictures = [viz.plot_timelines(trace, cursor_step=3), viz.plot_gantt(trace), viz.plot_block_grid(trace, 13),
            viz.plot_overview(trace), viz.compare(trace, trace).figure]
sizes = [len(viz.figure_png(fig, dpi=30)) for fig in pictures]
assert all(size > 1000 for size in sizes), sizes
blocks = [a for a in pictures[2].findobj() if a.get_gid() == "blocks"][0]
assert len(blocks.get_paths()) == 4

player = viz.Player(trace)
player.set_step(13)
assert player.lines and player.kv.num_used == 3 and player.picture()[:4] == b"\\x89PNG"
assert "<script" not in viz.html_report(trace)
with tempfile.TemporaryDirectory() as tmp:
    assert main(["replay", sys.argv[1], "--out", f"{tmp}/t.png", "--html", f"{tmp}/r.html"]) == 0
    assert main(["compare", sys.argv[1], sys.argv[1], "--out", f"{tmp}/c.png"]) == 0

loaded = sorted(m for m in sys.modules if m.split(".")[0] in BLOCKED)
assert not loaded, loaded
print("drew", len(pictures), "pictures and played", len(player.steps), "steps")
"""


def _python(code: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=300)


def test_viz_draws_and_plays_without_torch():
    result = _python(DRAW, str(TRACE))
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == "drew 5 pictures and played 35 steps"


def test_the_blocker_really_blocks():
    # Otherwise the test above would prove nothing: the engine does need torch.
    result = _python(BLOCKER + "import nanovllm_teach.engine.model_runner\n")
    assert result.returncode != 0 and "torch is blocked" in result.stderr
