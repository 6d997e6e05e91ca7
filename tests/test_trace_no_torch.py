"""A trace replays with the trace dependencies only: in a fresh interpreter where importing torch,
transformers or numpy fails, every module of ``nanovllm_teach.trace`` imports and a recorded trace loads,
tabulates, cross-checks, renders in both languages and exports to Perfetto.

``data/small_trace.jsonl`` is a real trace: two generate() calls on a random tiny checkpoint with four
KV blocks of 16 (a preemption, then a prefix-cache hit), recorded with ``test_trace_reader.record_trace``.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

TRACE = Path(__file__).resolve().parent / "data" / "small_trace.jsonl"

BLOCKER = """
import importlib.abc, sys
BLOCKED = ("torch", "transformers", "numpy")

class Blocker(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ImportError(f"{name} is blocked: the trace layer must not need it")
        return None

sys.meta_path.insert(0, Blocker())
"""

REPLAY = BLOCKER + """
import importlib, io, pkgutil
import nanovllm_teach
import nanovllm_teach.trace as trace

for module in pkgutil.walk_packages(trace.__path__, "nanovllm_teach.trace."):
    importlib.import_module(module.name)

t = trace.load_trace(sys.argv[1])
assert trace.check_consistency(t) == [], trace.check_consistency(t)
assert any(row.preempted for row in t.steps) and any(row.prefix_hit_seq_ids for row in t.steps)
assert [r.finish_reason for r in t.requests] == ["length"] * 3
trace.format_step_table(t.steps)
trace.format_request_table(t.requests)
trace.request_spans(t)
for lang in trace.LANGS:
    out = io.StringIO()
    trace.render_trace(t, lang, "all", out)
    lines = out.getvalue().splitlines()
    assert sum(line.startswith("TEACHING/") for line in lines) == len(t.events)  # "all" shows every event
chrome = trace.to_chrome_trace(t)
assert len([e for e in chrome["traceEvents"] if e["ph"] == "X" and e["pid"] == 1]) == len(t.steps)

loaded = sorted(m for m in sys.modules if m.split(".")[0] in BLOCKED)
assert not loaded, loaded
print("replayed", len(t.events), "events,", len(t.steps), "steps")
"""


def _python(code: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120)


def test_trace_layer_replays_without_torch():
    result = _python(REPLAY, str(TRACE))
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("replayed ")


def test_the_blocker_really_blocks():
    # Otherwise the test above would prove nothing: the engine does need torch.
    result = _python(BLOCKER + "import nanovllm_teach.engine.model_runner\n")
    assert result.returncode != 0 and "torch is blocked" in result.stderr


# The trace layer's modules, bottom up: a module may import only modules of earlier layers, so there is no
# import (or call) cycle, and the interpreter of events (``state``) never depends on what reads it.
LAYERS = [
    {"payload"}, {"events_startup", "events_scheduling", "events_execution"}, {"events_run"}, {"events"},
    {"schema", "reasons"}, {"state", "recorder"}, {"steps", "tables"}, {"reader"},
    {"consistency", "replay", "segments", "perfetto", "console"}, {"diff", "docs"},
]


def test_the_trace_layer_imports_only_downwards():
    import ast
    package = Path(__file__).resolve().parent.parent / "nanovllm_teach" / "trace"
    level = {name: n for n, names in enumerate(LAYERS) for name in names}
    assert set(level) == {p.stem for p in package.glob("*.py")} - {"__init__"}
    for name, n in level.items():
        tree = ast.parse((package / f"{name}.py").read_text(encoding="utf-8"))
        imported = {node.module.rsplit(".", 1)[-1] for node in ast.walk(tree)
                    if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("nanovllm_teach.trace.")}
        imported |= {alias.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                     and node.module == "nanovllm_teach.trace" for alias in node.names}
        for other in imported:
            assert level[other] < n, f"trace/{name}.py imports trace/{other}.py, which is not below it"


# What importing one module of the trace layer loads of the package: only the modules it imports (the
# package's ``__init__`` loads its names on use), so the engine's ``import ...trace.recorder`` stays small.
CONTRACT = {"payload", "events_startup", "events_run", "events_scheduling", "events_execution", "events"}
ONLY_WHAT_IT_NEEDS = {
    "events": CONTRACT,
    "recorder": CONTRACT | {"schema", "recorder"},
    "reasons": CONTRACT | {"reasons"},
}


def test_importing_one_module_loads_only_what_it_needs():
    for name, needed in ONLY_WHAT_IT_NEEDS.items():
        code = (f"import sys, nanovllm_teach.trace.{name}\n"
                "print(' '.join(m.rsplit('.', 1)[-1] for m in sys.modules if m.startswith('nanovllm_teach.trace.')))")
        result = _python(code)
        assert result.returncode == 0, result.stderr
        assert set(result.stdout.split()) == needed, name


def test_the_package_gives_every_name_it_lists_and_no_other():
    import pytest

    import nanovllm_teach.trace as trace

    assert trace.__all__ == sorted(trace.__all__) and set(trace.__all__) <= set(dir(trace))
    for name in trace.__all__:
        assert getattr(trace, name) is not None
    with pytest.raises(AttributeError):
        trace.NOT_A_NAME
