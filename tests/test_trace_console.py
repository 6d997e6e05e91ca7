"""The console renderer: every reason the engine emits has an English and a Chinese sentence, lines have
nano-vllm's teaching-log shape, verbosity levels filter as documented, and a replayed trace prints exactly what the live
run printed."""

from __future__ import annotations

import ast
import io
import re
from pathlib import Path

import pytest
import structlog

from nanovllm_teach.trace import (
    ConsoleRenderer, LANGS, Trace, TraceEvent, VERBOSITIES, explain, format_event, load_trace, render_trace,
)
from nanovllm_teach.trace.reasons import EVENT_REASONS, REASONS, has_sentence
from nanovllm_teach.trace.events import PAYLOADS
from test_trace_reader import SCENARIOS, record_scenario

ENGINE_DIR = Path(__file__).resolve().parents[1] / "nanovllm_teach" / "engine"

TEACHING_LINE = re.compile(r"^TEACHING/[A-Z_]+ \| phase=[a-z]+ \| reason=[^|]+( \| result=[A-Z]+ -> [A-Z]+)? "
                           r"\| stats=\{.*\}$")
STEP_LINE = re.compile(r"^step#\d+ (prefill|decode) (done in |完成，用时 )\d+\.\d\dms num_tokens_stat=-?\d+ "
                       r"finished_this_step=\[[\d, ]*\]$")
DETAIL_LINE = re.compile(r"^(prefill detail: |decode detail #\d+(/\d+)?: |prefill 详单：|decode 详单#\d+(/\d+)?：)")


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    """Every scenario recorded with four live renderers attached: (lang, verbosity) -> text per scenario."""
    from checkpoints import make_random_checkpoint

    root = tmp_path_factory.mktemp("console")
    checkpoint = make_random_checkpoint(root / "ckpt")
    combos = [("en", "detail"), ("zh", "detail"), ("zh", "normal"), ("en", "quiet")]
    out = {}
    for name in SCENARIOS:
        streams = {combo: io.StringIO() for combo in combos}
        sinks = [ConsoleRenderer(lang, stream, verbosity) for (lang, verbosity), stream in streams.items()]
        rec = record_scenario(name, checkpoint, root, sinks=sinks)
        out[name] = (load_trace(rec.path), {combo: stream.getvalue() for combo, stream in streams.items()})
    return out


def _literals(node: ast.AST) -> list[str]:
    """The string literals a reason expression can take (both branches of ``a if c else b``)."""
    if isinstance(node, ast.IfExp):
        return _literals(node.body) + _literals(node.orelse)
    return [node.value] if isinstance(node, ast.Constant) else []


def _engine_reason_keys() -> set[tuple[str, str]]:
    """(event, reason) for every emit site in the engine whose reason is a string literal: the untyped
    ``emit(EVENT, phase, reason, ...)`` and the typed ``record(phase, reason, Payload(...))``."""
    event_of = {cls.__name__: name for name, cls in PAYLOADS.items()}
    keys = set()
    for path in ENGINE_DIR.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            args = node.args
            if node.func.attr == "emit" and len(args) >= 3 and isinstance(args[0], ast.Constant):
                keys |= {(args[0].value, reason) for reason in _literals(args[2])}
            elif (node.func.attr == "record" and len(args) == 3 and isinstance(args[2], ast.Call)
                  and isinstance(args[2].func, ast.Name) and args[2].func.id in event_of):
                keys |= {(event_of[args[2].func.id], reason) for reason in _literals(args[1])}
    return keys


def test_every_reason_in_the_engine_source_has_sentences():
    keys = _engine_reason_keys()
    assert len(keys) >= 20, "the AST scan found too few emit sites: has the engine's emit signature changed?"
    # Keys built at run time: the finish reasons and the block manager's free reasons.
    keys |= {("STATE_TRANSITION", f"finished_{r}") for r in ("eos", "length", "max_model_len")}
    keys |= {("BLOCK_FREE", r) for r in ("finished", "preempted", "aborted")}
    missing = sorted(k for k in keys if not has_sentence(k[1], k[0]))
    assert not missing, f"reasons without sentences: {missing}"
    for sentences in [*REASONS.values(), *EVENT_REASONS.values()]:
        assert set(sentences) == set(LANGS) and all(sentences.values())


def test_every_recorded_event_renders_in_both_languages(live):
    seen_events = set()
    for name, (trace, _) in live.items():
        for event in trace.events:
            seen_events.add(event.event)
            assert has_sentence(event.reason, event.event), (name, event.event, event.reason)
            for lang in LANGS:
                line = format_event(event, lang)
                assert TEACHING_LINE.match(line), line
                assert f"reason={event.reason} |" not in line, line  # never the raw key
    # The scenarios between them exercise every event the CPU engine emits.
    assert seen_events >= {"ENGINE_INIT", "TP_RUNTIME_INIT", "MODEL_WEIGHTS_LOADED", "WARMUP", "KV_BUDGET_ESTIMATE",
                           "ENGINE_READY", "GENERATE_START", "GENERATE_FINISH", "REQUEST_ENQUEUE",
                           "SCHEDULE_PREFILL", "SCHEDULE_DECODE", "PREFIX_CACHE_HIT", "BLOCK_ALLOCATE", "BLOCK_FREE",
                           "PREEMPT", "PREPARE_PREFILL_TENSORS", "PREPARE_DECODE_TENSORS", "RUN_MODEL", "SAMPLE",
                           "STATE_TRANSITION", "STEP_DONE", "REQUEST_ABORT"}


def test_replay_prints_exactly_what_the_live_run_printed(live):
    for name, (trace, printed) in live.items():
        for (lang, verbosity), text in printed.items():
            replay = io.StringIO()
            render_trace(trace, lang, verbosity, replay)
            assert replay.getvalue() == text, (name, lang, verbosity)


def test_lines_have_the_teaching_log_shape(live):
    trace, printed = live["normal"]
    lines = printed[("zh", "normal")].splitlines()
    for line in lines:
        assert TEACHING_LINE.match(line) or STEP_LINE.match(line), line
    schedule = next(line for line in lines if line.startswith("TEACHING/SCHEDULE_PREFILL"))
    assert schedule.startswith("TEACHING/SCHEDULE_PREFILL | phase=prefill | reason=waiting 队列有可准入请求 | "
                               "stats={engine_step=1, seq_ids=[0, 1, 2], ")
    decode = next(line for line in lines if line.startswith("TEACHING/SCHEDULE_DECODE"))
    assert "reason=没有可预填充的请求：对运行中的 batch 做解码（连续批处理）" in decode and "decode_step_index=0" in decode
    first = trace.steps[0]
    assert f"step#1 prefill 完成，用时 {first.latency_ms:.2f}ms num_tokens_stat=278 finished_this_step=[]" in lines
    assert lines[-1].startswith("TEACHING/GENERATE_FINISH | phase=egress | reason=waiting/running 均为空 | "
                                "stats={total_steps=8, prefill_steps=1, decode_steps=7, n_outputs=3}")
    finished = [line for line in lines if "result=RUNNING -> FINISHED" in line]
    assert len(finished) == 3 and "达到 max_model_len" in finished[0] and "达到 max_tokens" in finished[1]
    assert lines[-2].startswith("step#8 decode 完成，用时") and lines[-2].endswith("finished_this_step=[0, 1]")
    english = printed[("en", "detail")].splitlines()
    assert any(line.startswith("step#8 decode done in ") for line in english)  # nano-vllm's own words in English


def test_detail_shows_tensors_for_three_decode_steps(live):
    _, printed = live["preemption"]
    for lang, label in (("en", "decode detail #"), ("zh", "decode 详单#")):
        lines = printed[(lang, "detail")].splitlines()
        for line in lines:
            assert TEACHING_LINE.match(line) or STEP_LINE.match(line) or DETAIL_LINE.match(line), line
        details = [line for line in lines if line.startswith(label)]
        assert [re.match(r"decode (detail |详单)#(\S+?)[:：]", d).group(2) for d in details] == ["1/3", "2/3", "3/3"]
        assert sum(line.startswith("TEACHING/PREPARE_DECODE_TENSORS") for line in lines) == 3
    zh = printed[("zh", "detail")].splitlines()
    first = next(line for line in zh if line.startswith("decode 详单#1/3"))
    # Step 2 decodes seqs 0 and 1 (prompts of 25 and 32 tokens + 1 sampled): the context_lens shape.
    assert "bs=2" in first and "context_lens=[26, 33]" in first and "block_tables=[[" in first
    prefill_steps = sum(line.startswith("TEACHING/SCHEDULE_PREFILL") for line in zh)
    assert sum(line.startswith("prefill 详单：") for line in zh) == prefill_steps > 1


def test_verbosity_levels(live):
    trace, printed = live["preemption"]
    quiet = printed[("en", "quiet")].splitlines()
    quiet_events = {line.split(" |")[0].removeprefix("TEACHING/") for line in quiet}
    native = {"DECODE_COMPILE"} & {e.event for e in trace.events}  # the native decode step, where it can run
    assert quiet_events == {"ENGINE_INIT", "TP_RUNTIME_INIT", "MODEL_WEIGHTS_LOADED", "WARMUP", "KV_BUDGET_ESTIMATE",
                            "ENGINE_READY", "GENERATE_START", "GENERATE_FINISH", "STATE_TRANSITION", "PREEMPT"} | native
    normal = printed[("zh", "normal")].splitlines()
    assert sum(bool(STEP_LINE.match(line)) for line in normal) == len(trace.steps)
    assert not any(line.startswith(("TEACHING/STEP_DONE", "TEACHING/PREPARE", "TEACHING/SAMPLE")) for line in normal)
    assert any(line.startswith("TEACHING/BLOCK_FREE") for line in normal)
    everything = io.StringIO()
    render_trace(trace, "en", "all", everything)
    lines = everything.getvalue().splitlines()
    decode_steps = sum(row.phase == "decode" for row in trace.steps)
    assert sum(line.startswith("TEACHING/PREPARE_DECODE_TENSORS") for line in lines) == decode_steps
    # Past the recorder's detail budget the trace kept shapes only, and the detail line says so.
    assert any(line.startswith(f"decode detail #{decode_steps}: ") and "context_lens.shape=(" in line
               for line in lines)


def test_interrupted_run_renders_aborts(live):
    _, printed = live["crashed"]
    text = printed[("en", "quiet")]
    assert "TEACHING/REQUEST_ABORT | phase=egress | reason=request aborted: everything it held is given back" in text
    assert "result=RUNNING -> FINISHED" in text and "reason=request aborted |" in text
    assert "reason=aborted request gives its KV blocks back" in printed[("en", "detail")]


def test_unknown_keys_and_events_fall_back_visibly():
    stream = io.StringIO()
    renderer = ConsoleRenderer("zh", stream)
    renderer(TraceEvent(0, 0, "SOMETHING_NEW", "decode", 4, "brand_new_reason", {"x": 1}))
    assert stream.getvalue() == ("TEACHING/SOMETHING_NEW | phase=decode | reason=brand_new_reason | "
                                 "stats={engine_step=4, x=1}\n")
    assert explain("brand_new_reason", "en") == "brand_new_reason"
    # A key that means one thing per event is said with its event; without one it shows as itself.
    assert explain("preempted", "en", event="BLOCK_FREE") != explain("preempted", "en", event="STATE_TRANSITION")
    assert explain("preempted", "en") == "preempted"


def test_formatting_of_values():
    event = TraceEvent(0, 0, "PREPARE_DECODE_TENSORS", "decode", 2, "one_token_per_sequence",
                       {"batch_size": 2, "context_lens_shape": [2], "context_lens": [12, 18],
                        "block_tables_shape": [2, 1], "block_tables": [[0], [1]], "flag": False, "none": None,
                        "ids": list(range(20))})
    line = format_event(event, "en")
    assert ("stats={engine_step=2, batch_size=2, context_lens_shape=(2,), block_tables_shape=(2, 1), flag=False, "
            "none=None, ids=[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, …(+4)]}") in line


def test_bad_arguments_and_structlog_left_alone():
    with pytest.raises(ValueError, match="lang"):
        ConsoleRenderer("fr")
    with pytest.raises(ValueError, match="verbosity"):
        ConsoleRenderer(verbosity="loud")
    with pytest.raises(ValueError, match="lang"):
        explain("step_complete", "de")
    assert VERBOSITIES == ("quiet", "normal", "detail", "all")
    configured = structlog.is_configured()
    ConsoleRenderer("en", io.StringIO())(TraceEvent(0, 0, "ENGINE_READY", "init", None, "engine_ready", {}))
    assert structlog.is_configured() == configured


def test_default_stream_is_stdout(capsys):
    ConsoleRenderer("en")(TraceEvent(0, 0, "GENERATE_START", "ingress", None, "batch_enters_engine",
                                     {"n_prompts": 2}))
    captured = capsys.readouterr()
    assert captured.err == ""
    assert captured.out == ("TEACHING/GENERATE_START | phase=ingress | reason=a batch of requests enters the engine "
                            "| stats={n_prompts=2}\n")


def test_render_trace_takes_a_trace_or_a_run_of_its_events(capsys):
    events = [TraceEvent(0, 0, "GENERATE_START", "ingress", None, "batch_enters_engine", {"n_prompts": 2}),
              TraceEvent(1, 5, "GENERATE_FINISH", "egress", None, "queues_empty",
                         {"total_steps": 0, "prefill_steps": 0, "decode_steps": 0, "n_outputs": 0})]
    render_trace(events[1:], verbosity="quiet")
    only_last = capsys.readouterr().out
    assert only_last.startswith("TEACHING/GENERATE_FINISH") and only_last.count("\n") == 1
    render_trace(Trace({}, events), verbosity="quiet")
    assert capsys.readouterr().out == ("TEACHING/GENERATE_START | phase=ingress | reason=a batch of requests "
                                       "enters the engine | stats={n_prompts=2}\n" + only_last)


def test_run_account_tells_the_decisions_in_a_few_lines():
    """What the demo prints instead of the stream: a stretch of alike steps per line, the decisions that end
    each (admissions, preemptions, re-prefills, finishes and the batch shrinking), and KV use."""
    from pathlib import Path

    from nanovllm_teach.trace import load_trace
    from nanovllm_teach.trace.console import format_run_account

    traces = Path(__file__).resolve().parent.parent / "traces"
    trace = load_trace(traces / "preemption.jsonl")
    lines = format_run_account(trace)
    text = "\n".join(lines)
    assert lines[0].startswith(f"What the engine did: {len(trace.steps)} steps (2 prefill, ")
    preempt = next(r for r in trace.steps if r.preempted)
    victims = ", ".join(map(str, preempt.preempted))
    assert f"preempted seqs {victims} at step {preempt.step}: no free block for the decode" in text
    again = next(r for r in trace.steps if r.phase == "prefill" and r.step > preempt.step)
    assert f"step {again.step} " in text and "again (preempted before" in text
    first_finish = next(r for r in trace.steps if r.finished)
    assert (f"finished at step {first_finish.step} (eos) and freed their blocks; the batch shrinks to "
            f"{first_finish.running_len}") in text
    held = max(r.held_blocks for r in trace.steps)
    assert lines[-1].startswith(f"  KV use: peak {held} of {trace.settings.num_blocks} blocks")
    # Decode steps over one batch are one line, so a whole run fits on a screen.
    for path in sorted(traces.glob("*.jsonl")):
        assert len(format_run_account(load_trace(path))) <= 40, path.name


@pytest.mark.parametrize("lang, median, spikes", [("en", "median 1.0 ms/step", ", 2 spikes up to 20.0 ms"),
                                                   ("zh", "中位数 1.0 ms/步", "，2 个尖峰步，最高 20.0 ms")])
def test_run_account_gives_the_median_step_and_the_spikes_apart(tmp_path, lang, median, spikes):
    """Decode steps of 1 ms with two pauses of 18 and 20 ms: the line says 1.0 ms (a mean would say 2.5 ms in the
    first stretch) and the two spikes beside it; a stretch without spikes says none."""
    import json
    from pathlib import Path

    from nanovllm_teach.trace import load_trace
    from nanovllm_teach.trace.console import format_run_account

    lines = (Path(__file__).resolve().parent.parent / "traces" / "walkthrough.jsonl").read_text().splitlines()
    decode = 0
    for i, line in enumerate(lines):
        event = json.loads(line)
        if event.get("event") == "STEP_DONE" and event["phase"] == "decode":
            decode += 1
            event["stats"]["latency_ms"] = {3: 18.0, 5: 20.0}.get(decode, 1.0)
            lines[i] = json.dumps(event)
    path = tmp_path / "paused.jsonl"
    path.write_text("\n".join(lines) + "\n")
    stretches = [line for line in format_run_account(load_trace(path), lang=lang) if "->" not in line][2:-1]
    first, second = (line for line in stretches if median in line)
    assert first.endswith(median + spikes) and second.endswith(median), stretches
