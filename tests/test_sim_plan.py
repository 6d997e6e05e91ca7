"""The deployment planner (``nanovllm-teach plan``, ``plan/``): the rate search as a pure function of its
probes, a probe's verdict, the memory fit, the rows and their costs, resuming from the log, and the command
line's refusals (one line, exit status 2)."""

from __future__ import annotations

import json
import math

import pytest

from nanovllm_teach.cli import main
from nanovllm_teach.i18n import speaking
from nanovllm_teach.plan import search as plan_search
from nanovllm_teach.plan.probes import Candidate, Objective, PlanWorkload, Probe, memory_fit, probe
from nanovllm_teach.plan.rates import HEADROOM, next_rate, search_steps, sustained_rate
from nanovllm_teach.plan.results import plan_rows, ranked, results_json
from nanovllm_teach.sim.prices import gpu_prices, parse_price, shipped_prices

SMALL = PlanWorkload("qwen3-0.6b", "uniform:16:64", "uniform:4:16", max_model_len=2048, warmup_requests=100)
SLO = Objective(ttft_ms=200.0, tpot_ms=20.0)
L4 = Candidate("l4", 1, 64, 2048)


def _probe(rate, passed, saturated=100.0):
    return Probe(rate, passed, 1.0, 2.0, 1.0, 2.0, 1.0, 1.0, 1.0, saturated, 1000.0)


def test_the_search_saturates_first_then_bisects_below_the_headroom():
    assert next_rate([], 3) is None
    history = [_probe(None, False)]
    assert next_rate(history, 3) == HEADROOM * 100 / 2
    history.append(_probe(62.5, True))
    assert next_rate(history, 3) == float(f"{(62.5 + 125) / 2:.4g}")
    history += [_probe(93.75, False), _probe(78.13, True)]
    assert next_rate(history, 3) is False  # 1 saturation + 3 bisections
    assert sustained_rate(history) == 78.13
    assert sustained_rate([_probe(None, False), _probe(62.5, False)]) == 0.0
    assert search_steps(0.05) == math.ceil(math.log2(HEADROOM / 0.05))
    with pytest.raises(ValueError, match="resolution"):
        search_steps(1.5)


def test_a_probe_passes_below_what_the_engine_sustains_and_fails_above():
    saturated = probe(L4, SMALL, SLO, None)
    assert not saturated.passed and saturated.requests_per_s > 0
    low = probe(L4, SMALL, SLO, 0.1 * saturated.requests_per_s)
    high = probe(L4, SMALL, SLO, 1.2 * saturated.requests_per_s)
    assert low.passed and low.ttft_p99_ms <= SLO.ttft_ms
    # Requests pile up before the engine (this small model's steps are quicker than the API server's work on a
    # request): the probe stops once its verdict cannot change.
    assert not high.passed and high.decided_early and high.in_system_last > high.in_system_first
    assert probe(L4, SMALL, SLO, low.rate) == low  # the same probe, the same figures


def test_the_memory_fit_says_what_one_gpu_holds():
    workload = PlanWorkload("llama-3.1-8b")
    fit = memory_fit(Candidate("h100-sxm", 1, 256, 8192), workload)
    assert 14 < fit.weights_gib < 16 and fit.kv_blocks > 0 and fit.longest_tokens == 8192 and fit.problem is None
    assert memory_fit(Candidate("h100-sxm", 2, 256, 8192), workload).weights_gib == pytest.approx(fit.weights_gib / 2)
    too_big = memory_fit(Candidate("l4", 1, 256, 8192), PlanWorkload("llama-3.1-70b"))
    assert too_big.kv_blocks == 0 and "no memory left" in too_big.problem and "raise" not in too_big.problem
    with speaking("zh"):  # what is wrong, in the language read, without the remedies after the colon
        zh = memory_fit(Candidate("l4", 1, 256, 8192), PlanWorkload("llama-3.1-70b")).problem
        long_requests = PlanWorkload("llama-3.1-70b", prompt_lens="fixed:30000", output_lens="fixed:2000",
                                     max_model_len=32768)
        short = memory_fit(Candidate("h100-sxm", 2, 256, 8192), long_requests)
    assert zh.startswith("l4（tp=1）上已没有内存留给") and "请调高" not in zh
    assert short.problem == f"它能容纳的最长请求是 {short.longest_tokens} 个 token，而工作负载中最长的达到 32000 个"
    assert 0 < short.longest_tokens < 32000
    with pytest.raises(ValueError, match="this-cpu is measured"):
        memory_fit(Candidate("this-cpu", 1, 8, 512), workload)


def test_rows_multiply_a_replica_and_the_cheapest_reaching_the_target_wins():
    searches = {L4: [_probe(None, False), _probe(40.0, True)], Candidate("rtx-4090", 1, 64, 2048):
                [_probe(None, False), _probe(50.0, True)], Candidate("h100-sxm", 1, 64, 2048): [_probe(None, False),
                                                                                             _probe(9.0, False)]}
    fits = {c: memory_fit(c, SMALL) for c in searches}
    prices = gpu_prices({"l4": 0.5})
    rows = plan_rows(searches, fits, SMALL, [1, 3], prices)
    assert len(rows) == 4  # the H100 sustained nothing: no row
    best = ranked(rows, 100.0)
    assert [(r.candidate.hardware, r.replicas, r.sustained_rate, r.cost_per_hour) for r in best] == [
        ("l4", 3, 120.0, 1.5), ("rtx-4090", 3, 150.0, round(3 * prices["rtx-4090"], 4))]
    assert "--rate 40 " in best[0].command and "--hardware l4" in best[0].command
    assert json.loads(results_json(rows, SMALL, SLO, 100.0, 3))["cheapest"]["replicas"] == 3


def test_every_shipped_price_names_its_page_and_date():
    for name, entry in shipped_prices().items():
        assert entry["usd_per_gpu_hour"] > 0 and entry["source"].startswith("https://")
        assert len(entry["date"]) == 10, name
    assert parse_price("h100-sxm=2.5") == ("h100-sxm", 2.5)
    for bad in ("h100-sxm", "h100-sxm=free", "=2", "l4=-1", "l4=nan"):
        with pytest.raises(ValueError, match="--price"):
            parse_price(bad)


def test_a_stopped_search_resumes_from_its_log(tmp_path, monkeypatch):
    log = tmp_path / "plan-log.jsonl"
    whole = plan_search.run_searches([L4], SMALL, SLO, 2, log_path=log, use_ray=False, progress=False)
    lines = log.read_text().splitlines(keepends=True)
    assert len(lines) == 1 + 3
    log.write_text("".join(lines[:2]) + lines[2][:10])  # stopped while writing its second probe
    ran = []
    monkeypatch.setattr(plan_search, "probe", lambda *args: ran.append(args[-1]) or probe(*args))
    again = plan_search.run_searches([L4], SMALL, SLO, 2, log_path=tmp_path / "plan-log.jsonl", use_ray=False,
                                     progress=False)
    assert again == whole and len(ran) == 2
    with pytest.raises(ValueError, match="other settings"):
        plan_search.run_searches([L4], SMALL, Objective(100.0, 20.0), 2, log_path=log, use_ray=False, progress=False)


@pytest.mark.parametrize("argv, message", [
    (["--gpus", "tpu-v5"], "unknown GPU 'tpu-v5'"),
    (["--gpus", "rtx-4070-laptop"], "no price per hour"),
    (["--tp", "1,x"], "--tp must be comma-separated ints"),
    (["--replicas", "0"], "--replicas must list distinct ints >= 1"),
    (["--probe-requests", "100"], "at least 1000 requests"),
    (["--prompt-lens", "fixed:9000"], "do not fit max_model_len"),
    (["--goodput", "1.5"], "goodput must be a share"),
    (["--ttft-ms", "0"], "Slo.ttft_ms must be a positive"),
    (["--price", "h100-sxm=cheap"], "--price"),
    (["--out", "plan.txt"], "use .json or .csv"),
])
def test_mistakes_are_one_line_and_exit_2(tmp_path, capsys, argv, message):
    if "--out" in argv:
        argv = ["--out", str(tmp_path / argv[1])]
    assert main(["plan", "--rate", "10", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_gpus_fitted_on_fewer_than_two_cases_are_marked_unfitted(tmp_path, capsys):
    from nanovllm_teach.sim.published import is_fitted

    assert is_fitted("h100-sxm") and not is_fitted("h200") and not is_fitted("a100-80gb")  # a100-80gb: one case
    assert main(["simulate", "--list"]) == 0
    listed = capsys.readouterr().out
    assert "h100-sxm" in listed and "fitted on 7 cases" in listed and "unfitted (0 of 2 fitted cases)" in listed
    assert main(["simulate", "--model", "qwen3-0.6b", "--hardware", "h200", "--requests", "20", "--rate", "50",
                 "--out", str(tmp_path / "t.jsonl")]) == 0
    assert "h200 is unfitted" in capsys.readouterr().out
    from nanovllm_teach.trace.reader import load_trace
    assert load_trace(tmp_path / "t.jsonl").header["simulated"]["fitted_cases"] == 0


def test_a_rows_simulate_command_reproduces_its_probe(capsys):
    import shlex

    from nanovllm_teach.plan.results import simulate_command

    measured = probe(L4, SMALL, SLO, 20.0)  # a row's rate is one that passed: its probe ran to the end
    assert measured.passed and not measured.decided_early
    command = shlex.split(simulate_command(L4, SMALL, 20.0))
    assert command[:2] == ["nanovllm-teach", "simulate"] and main(command[1:]) == 0
    assert f"{measured.output_tokens_per_s:.0f} tok/s" in capsys.readouterr().out


def test_a_serving_engine_reaches_every_probe_and_the_command_that_reproduces_it(capsys):
    import dataclasses
    import shlex

    from nanovllm_teach.plan.results import simulate_command

    split = Candidate("h100-sxm", 2, 64, 2048)  # two GPUs: the engines' collectives cost apart
    older, newer = (dataclasses.replace(SMALL, serving_engine=engine) for engine in ("vllm-0.5", "vllm-0.6"))
    fast, slow = probe(split, older, SLO, 50.0), probe(split, newer, SLO, 50.0)
    assert fast.tpot_p50_ms < slow.tpot_p50_ms
    command = shlex.split(simulate_command(split, newer, 50.0))
    assert command[-2:] == ["--serving-engine", "vllm-0.6"] and main(command[1:]) == 0
    assert f"{slow.output_tokens_per_s:.0f} tok/s" in capsys.readouterr().out
    with pytest.raises(ValueError, match="serving_engine"):
        dataclasses.replace(SMALL, serving_engine="vllm-9")


@pytest.mark.parametrize("objective", [SLO, Objective(ttft_ms=1000.0, tpot_ms=25.0, tpot_quantile="p50"),
                                       Objective(ttft_ms=100.0, tpot_ms=10.0, goodput=0.9)],
                         ids=["queue", "latency", "goodput"])
def test_a_probe_stopped_once_it_cannot_pass_gives_the_search_run_to_the_end(monkeypatch, objective):
    from nanovllm_teach.plan import probes

    def search() -> list[Probe]:
        history: list[Probe] = []
        while (rate := next_rate(history, 4)) is not False:
            history.append(probe(L4, SMALL, objective, rate))
        return history

    early = search()
    monkeypatch.setattr(probes.FailureWatch, "of", classmethod(lambda cls, *args: None))
    whole = search()
    assert [(p.rate, p.passed) for p in early] == [(p.rate, p.passed) for p in whole]
    assert sustained_rate(early) == sustained_rate(whole) > 0
    stopped = [p for p in early if p.decided_early]
    assert stopped and all(not p.passed for p in stopped)  # some probe did stop early, and only failures do
    assert not any(p.decided_early for p in whole)


def test_the_progress_line_and_the_slo_follow_lang_zh(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(plan_search, "probe", lambda candidate, workload, objective, rate:
                        _probe(rate, rate is not None and rate < 60))
    argv = ["--lang", "zh", "plan", "--model", "qwen3-0.6b", "--rate", "10", "--gpus", "l4", "--price", "l4=0.8",
            "--tp", "1", "--max-num-seqs", "64", "--max-num-batched-tokens", "2048", "--replicas", "1",
            "--goodput", "0.9", "--serial", "--log", str(tmp_path / "log.jsonl")]
    assert main(argv) == 0
    captured = capsys.readouterr()
    assert "探测: 100%" in captured.err and "次/s" in captured.err  # tqdm's description and unit
    assert "90% 的请求同时满足首 token 延迟 <= 1000 ms、每个输出 token 的时间 <= 50 ms" in captured.out


def test_a_run_ended_by_until_aborts_what_is_left_and_frees_its_blocks():
    from nanovllm_teach.llm import LLM
    from nanovllm_teach.workload.arrivals import serve_workload

    llm = LLM("qwen3-0.6b", runner="simulated", hardware="l4", max_num_seqs=16, max_num_batched_tokens=2048,
              max_model_len=2048)
    requests = SMALL.requests(50.0)[:200]
    seen: list[int] = []
    result = serve_workload(llm, requests, answers=llm.answers, until=lambda done, now_s: seen.append(1) or
                            len(seen) == 40)
    assert len(seen) == 40 and result.num_steps == 40  # it asked after every step and ended at its True
    assert llm.is_finished() and llm.scheduler.block_manager.num_free_blocks == llm.scheduler.block_manager.num_blocks
    assert any(t.finish_s is None for t in result.requests.values())  # the unfinished ones keep their times
    assert serve_workload(llm, requests[:5], answers=llm.answers).num_steps > 0  # and the engine serves again
