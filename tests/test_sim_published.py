"""The simulator against published measurements of real engines (nanovllm_teach/sim/published.json): the file
is checked when loaded, at most half of the cases chose the factors, and no judged error grows."""

import copy
import json
import subprocess
import sys
from pathlib import Path

import pytest

from nanovllm_teach import LLM
from nanovllm_teach.settings import SERVING_ENGINES, Settings
from nanovllm_teach.sim.efficiency import DEVICE_EFFICIENCY, ENGINE_EFFICIENCY, GPU_API_SERVER, Efficiency
from nanovllm_teach.sim.published import CASES_FILE, case_errors, dump_cases, load_cases

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_sim_published import simulate_case  # noqa: E402  (the benchmark runs every case the same way)
MARGIN = 0.02  # how much a judged error may grow past its recorded value (a draw or a rounding, not a change)
CASES = load_cases()
# The judged figures whose recorded error is outside the goal: the goal stays, a miss is shown, not hidden. None
# today: each case runs with its serving engine's collectives (sim/efficiency.py's ENGINE_EFFICIENCY). Without
# them, one cost for both engines put vLLM 0.6.0's 70B on four H100s at 8 requests/s 18% fast in decode and the
# 70B FP8 runs of the older vLLM on four H100s 11% short of their throughput.
OUTSIDE_THE_GOAL: set[tuple[str, str]] = set()


def test_cases_are_cited_split_and_recorded():
    assert len({c.source.split("/blob/")[0] for c in CASES}) >= 3  # sources, not just points of one
    fitted = [c for c in CASES if c.role == "fitted"]
    judged = [c for c in CASES if c.role == "judged"]
    assert 2 * len(fitted) <= len(CASES) and len(judged) >= 4
    for case in judged:
        assert set(case.recorded_error) == set(case.judged), case.id
        for name, error in case.recorded_error.items():  # the quality bar: 10%, TTFT 25%
            outside = abs(error) > (0.25 if name == "ttft_p50_ms" else 0.10)
            assert outside == ((case.id, name) in OUTSIDE_THE_GOAL), (case.id, name, error)
    for case in CASES:
        assert case.source.startswith("https://") and case.quote and case.not_judged_why


# Two judged cases send 5,000 requests at once, which takes the simulator about 20 s of CPU each: the
# benchmark (benchmarks/bench_sim_published.py) checks them, this fast test every other judged case.
QUICK = [c for c in CASES if c.role == "judged" and c.workload.num_requests <= 2500]


def test_most_judged_cases_are_checked_here():
    assert 2 * len(QUICK) > sum(c.role == "judged" for c in CASES)


@pytest.mark.parametrize("case", QUICK, ids=lambda c: c.id)
def test_judged_errors_do_not_grow(case):
    errors = case_errors(case, simulate_case(case))
    for name in case.judged:
        assert abs(errors[name]) <= abs(case.recorded_error[name]) + MARGIN, (name, errors[name])


def test_fitted_cases_are_the_only_ones_behind_a_gpus_factors():
    fitted_gpus = {c.hardware for c in CASES if c.role == "fitted"}
    assert set(DEVICE_EFFICIENCY) <= fitted_gpus
    assert Efficiency.for_device("h100-sxm").memory == DEVICE_EFFICIENCY["h100-sxm"]["memory"]
    # nano-vllm's README benchmark runs on this GPU with the defaults (offline: no API server): its -8.5% does not move
    assert Efficiency.for_device("rtx-4070-laptop") == Efficiency(**GPU_API_SERVER)
    llm = LLM("qwen3-0.6b", runner="simulated", hardware="h100-sxm", max_model_len=1024)
    assert llm.model_runner.cost_model.eff == Efficiency.for_device("h100-sxm")
    llm.close()


def test_a_serving_engines_costs_are_fitted_on_its_own_runs_only():
    assert set(ENGINE_EFFICIENCY) == set(SERVING_ENGINES)
    for engine, factors in ENGINE_EFFICIENCY.items():
        runs = [c for c in CASES if c.serving_engine == engine]
        assert any(c.role == "fitted" for c in runs) and any(c.role == "judged" for c in runs), engine
        # its collectives' cost from its own tensor-parallel runs
        assert any(c.role == "fitted" and c.engine_settings.get("tensor_parallel_size", 1) > 1 for c in runs)
        for gpu in ("h100-sxm", "a100-80gb"):  # the engine's software, whatever GPU it drives
            own = Efficiency.for_device(gpu, engine)
            assert {name: getattr(own, name) for name in factors} == factors
            assert own.memory == Efficiency.for_device(gpu).memory  # the GPU's own factors stay
    # the two engines' runs on the same H100s ask for collectives of different costs: that is why there are two
    assert len({f["allreduce_latency_s"] for f in ENGINE_EFFICIENCY.values()}) == 2


@pytest.mark.parametrize("asked, words", [
    (dict(runner="simulated", hardware="h100-sxm", serving_engine="vllm-9"), "serving_engine"),
    (dict(serving_engine="vllm-0.6"), "needs runner='simulated'"),
    (dict(runner="simulated", hardware="this-cpu", serving_engine="vllm-0.6"), "this-cpu"),
    (dict(runner="simulated", hardware="h100-sxm", serving_engine="vllm-0.6", sim_factors="f.json"), "not both"),
])
def test_a_serving_engine_is_checked(asked, words):
    with pytest.raises(ValueError, match=words):
        LLM("qwen3-0.6b", max_model_len=1024, **asked)


def test_a_serving_engine_reaches_the_simulated_engine_and_its_trace(tmp_path):
    from nanovllm_teach.trace.reader import load_trace

    llm = LLM("qwen3-0.6b", runner="simulated", hardware="h100-sxm", max_model_len=1024, serving_engine="vllm-0.5",
              trace=tmp_path / "t.jsonl")
    assert llm.model_runner.cost_model.eff == Efficiency.for_device("h100-sxm", "vllm-0.5")
    assert llm.model_runner.cost_model.eff.allreduce_latency_s == ENGINE_EFFICIENCY["vllm-0.5"]["allreduce_latency_s"]
    llm.generate([[1, 2, 3]])
    llm.close()
    assert load_trace(tmp_path / "t.jsonl").header["simulated"]["serving_engine"] == "vllm-0.5"
    assert Settings(runner="simulated", serving_engine="vllm-0.5").serving_engine == "vllm-0.5"


def _damaged(tmp_path, change):
    data = json.loads(CASES_FILE.read_text(encoding="utf-8"))
    change(data["cases"])
    path = tmp_path / "published.json"
    path.write_text(dump_cases(data))
    return path


@pytest.mark.parametrize("change, words", [
    (lambda cs: cs[0].update(role="tuned"), "role"),
    (lambda cs: cs[0].update(source="http://example.com"), "https"),
    (lambda cs: cs[0].update(hardware="tpu-v9"), "tpu-v9"),
    (lambda cs: cs[0].update(model="gpt-5"), "gpt-5"),
    (lambda cs: cs[0]["workload"].update(num_requests=10**9), "num_requests"),
    (lambda cs: cs[0]["workload"].update(prompt=-3), "prompt"),
    (lambda cs: cs[3]["workload"]["prompt"].pop(), "prompt"),
    (lambda cs: cs[3]["workload"].update(output=128), "both"),
    (lambda cs: cs[0]["measured"].update(tpot_p50_ms=-1), "measured"),
    (lambda cs: cs[0].update(judged=["p99_ms"]), "judged"),
    (lambda cs: cs[1].update(recorded_error={"ttft_p50_ms": 0.1}), "recorded_error"),
    (lambda cs: cs[3]["engine_settings"].update(max_model_len=10**9), "engine_settings"),
    (lambda cs: cs[3]["engine_settings"].update(enforce_eager=True), "engine_settings"),
    (lambda cs: cs.append(copy.deepcopy(cs[0])), "twice"),
    (lambda cs: [c.update(role="fitted") for c in cs], "half"),
    (lambda cs: cs[0].update(quantization="int4"), "quantization"),
    (lambda cs: cs[0].update(serving_engine="vllm-9"), "serving_engine"),
    (lambda cs: cs[0].update(hardware="a100-80gb", quantization="fp8"), "a100-80gb has no FP8 tensor cores"),
])
def test_a_damaged_file_is_refused_saying_what(tmp_path, change, words):
    with pytest.raises(ValueError, match=words):
        load_cases(_damaged(tmp_path, change))


def test_not_json_is_refused(tmp_path):
    path = tmp_path / "published.json"
    path.write_text("{not json")
    with pytest.raises(ValueError, match="cannot be read as JSON"):
        load_cases(path)


def test_bench_script_refuses_an_unknown_option():
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_sim_published.py"), "--bogus"],
                          capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert done.returncode == 2 and "--bogus" in done.stderr


def _served(admit_every, concurrency=None):
    from nanovllm_teach.workload.arrivals import serve_workload
    from nanovllm_teach.workload.requests import Fixed, Poisson, make_workload

    llm = LLM("qwen3-0.6b", runner="simulated", hardware="h100-sxm", max_model_len=1024)
    workload = make_workload(60, Poisson(200.0), Fixed(200), Fixed(40), vocab_size=1000, seed=3)
    result = serve_workload(llm, workload, answers=llm.answers, admit_every=admit_every, concurrency=concurrency)
    llm.close()
    return result


def test_admission_every_k_steps_delays_first_tokens_only():
    every, eight = _served(1), _served(8)
    assert eight.output_tokens == every.output_tokens == 60 * 40
    ttft = lambda r: sorted(t.ttft_s for t in r.requests.values())  # noqa: E731
    assert sum(ttft(eight)) > sum(ttft(every))  # requests waited for a scheduling step
    # a request waits at most for the 7 steps before the next admission, each no longer than the longest step
    longest_step = max(t.ttft_s for t in every.requests.values())
    assert max(ttft(eight)) <= max(ttft(every)) + 7 * longest_step
    closed = _served(4, concurrency=8)
    assert len(closed.requests) == 60 and all(t.finish_s is not None for t in closed.requests.values())


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, 10**6])
def test_admission_every_is_checked(bad):
    with pytest.raises(ValueError, match="admit_every"):
        _served(bad)
