"""The engine's public API: what users pass in, what they get back, and what bad input does."""

from __future__ import annotations

import pytest

from checkpoints import make_random_checkpoint
from nanovllm_teach import LLM, SamplingParams


@pytest.fixture(scope="module")
def llm(tmp_path_factory):
    path = make_random_checkpoint(tmp_path_factory.mktemp("ckpt"))
    return LLM(path, kvcache_block_size=16, max_model_len=256, max_num_batched_tokens=512,
               num_kvcache_blocks=40)


def _assert_clean(llm):
    bm = llm.scheduler.block_manager
    assert llm.is_finished()
    assert bm.num_free_blocks == bm.num_blocks
    assert all(b.ref_count == 0 for b in bm.blocks)


@pytest.mark.parametrize("prompt, params, error, match", [
    ("", SamplingParams(), ValueError, "empty"),
    ([], SamplingParams(), ValueError, "empty"),
    ([1] * 300, SamplingParams(), ValueError, "max_model_len"),
    ([1, 2, 10**6], SamplingParams(), ValueError, "outside the vocabulary"),
    ([1, -3], SamplingParams(), ValueError, "outside the vocabulary"),
    ([1, 2.5], SamplingParams(), TypeError, "list of int"),
    ([1, True], SamplingParams(), TypeError, "list of int"),
    (42, SamplingParams(), TypeError, "str or a list"),
    ([1, 2], "greedy", TypeError, "SamplingParams"),
    ("caf\udce9 au lait", SamplingParams(), ValueError, "character 3 is '\\\\udce9', a lone surrogate"),
])
def test_bad_request_is_rejected_and_nothing_is_enqueued(llm, prompt, params, error, match):
    with pytest.raises(error, match=match):
        llm.add_request(prompt, params)
    _assert_clean(llm)


@pytest.mark.parametrize("kwargs, match", [
    (dict(max_tokens=0), "max_tokens"),
    (dict(max_tokens=-5), "max_tokens"),
    (dict(temperature=-0.1), "temperature"),
    (dict(temperature=float("nan")), "temperature"),
    (dict(seed=-1), r"seed must be between 0 and 2\*\*64 - 1, got -1"),
    (dict(seed=2**64), "seed must be between"),
])
def test_bad_sampling_params(kwargs, match):
    with pytest.raises(ValueError, match=match):
        SamplingParams(**kwargs)


def test_params_list_of_wrong_length_enqueues_nothing(llm):
    with pytest.raises(ValueError, match="2 SamplingParams for 3 prompts"):
        llm.generate([[1], [2], [3]], [SamplingParams(), SamplingParams()], use_tqdm=False)
    _assert_clean(llm)


def test_one_bad_prompt_in_a_batch_enqueues_none_of_it(llm):
    with pytest.raises(ValueError, match="empty"):
        llm.generate([[1, 2], [3, 4], []], SamplingParams(max_tokens=4), use_tqdm=False)
    _assert_clean(llm)


def test_request_that_never_fits(tmp_path):
    path = make_random_checkpoint(tmp_path)
    small = LLM(path, kvcache_block_size=16, max_model_len=256, max_num_batched_tokens=256, num_kvcache_blocks=4)
    with pytest.raises(ValueError, match="could never fit"):
        small.add_request([1] * 60, SamplingParams(max_tokens=10))  # 70 tokens > 4 blocks of 16
    _assert_clean(small)
    # The engine is still usable: a request that fits runs to completion.
    out = small.generate([[1] * 30], SamplingParams(temperature=0, max_tokens=10), use_tqdm=False)
    assert len(out[0]["token_ids"]) >= 1
    _assert_clean(small)


def test_unknown_engine_setting_is_named(tmp_path):
    path = make_random_checkpoint(tmp_path)
    with pytest.raises(TypeError, match="max_num_seq\\b"):
        LLM(path, max_num_seq=4)
    with pytest.raises(ValueError, match="kvcache_block_size"):
        LLM(path, kvcache_block_size=0)


def test_outputs_in_prompt_order_with_strings_and_ids(llm):
    prompts = ["hello world", [5, 6, 7, 8, 9, 10, 11, 12] * 4, "the quick brown fox"]
    params = [SamplingParams(temperature=0, max_tokens=n) for n in (9, 2, 5)]
    outs = llm.generate(prompts, params, use_tqdm=False)
    assert [len(o["token_ids"]) for o in outs] == [9, 2, 5]  # random model: EOS is (almost) never greedy
    assert [o["finish_reason"] for o in outs] == ["length"] * 3
    assert outs[0]["text"] == llm.tokenizer.decode(outs[0]["token_ids"])
    _assert_clean(llm)


def test_step_by_step_equals_generate(llm):
    params = SamplingParams(temperature=0, max_tokens=6)
    expected = [o["token_ids"] for o in llm.generate([[3, 4, 5], [9] * 20], params, use_tqdm=False)]
    ids = [llm.add_request([3, 4, 5], params), llm.add_request([9] * 20, params)]
    finished = {}
    while not llm.is_finished():
        outputs, _ = llm.step()
        finished.update(outputs)
    assert [finished[i] for i in ids] == expected


def test_seeded_sampling_is_independent_of_the_batch(llm):
    seeded = SamplingParams(temperature=0.9, max_tokens=12, seed=1234)
    alone = llm.generate([[7, 8, 9]], seeded, use_tqdm=False)[0]["token_ids"]
    others = [SamplingParams(temperature=1.0, max_tokens=n) for n in (3, 20, 7)]
    batched = llm.generate([[1, 2], [7, 8, 9], [4] * 30, [5]], [others[0], seeded, others[1], others[2]],
                           use_tqdm=False)[1]["token_ids"]
    assert alone == batched


def test_ignore_eos_runs_to_max_tokens(llm):
    eos = llm.eos_token_id
    out = llm.generate([[eos, eos]], SamplingParams(temperature=0, max_tokens=7, ignore_eos=True),
                       use_tqdm=False)[0]
    assert len(out["token_ids"]) == 7 and out["finish_reason"] == "length"


def test_step_without_requests_is_an_error(llm):
    with pytest.raises(RuntimeError, match="no request"):
        llm.step()


def test_interrupted_generate_leaves_nothing_behind(llm, monkeypatch):
    calls = {"n": 0}
    real_run = llm.model_runner.run

    def failing_run(batch):
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyboardInterrupt
        return real_run(batch)

    monkeypatch.setattr(llm.model_runner, "run", failing_run)
    with pytest.raises(KeyboardInterrupt):
        llm.generate([[1, 2, 3], [4] * 40], SamplingParams(max_tokens=10), use_tqdm=False)
    _assert_clean(llm)


def _first_step_of(rec, seq_id):
    return min(e.step for e in rec.events if e.event == "SCHEDULE_PREFILL" and seq_id in e.stats["seq_ids"])


@pytest.mark.parametrize("policy", ["continuous", "static"])
def test_arrivals_join_according_to_the_policy(tmp_path, policy):
    from nanovllm_teach.trace import TraceRecorder
    rec = TraceRecorder()
    llm = LLM(make_random_checkpoint(tmp_path), trace=rec, scheduling_policy=policy, kvcache_block_size=16,
              max_model_len=256, max_num_batched_tokens=256, num_kvcache_blocks=40)
    params = [SamplingParams(temperature=0, max_tokens=n, ignore_eos=True) for n in (30, 4, 10)]
    outs = llm.generate([[1, 2, 3], [4, 5], [6, 7, 8]], params, use_tqdm=False, arrival_steps=[0, 0, 5])
    assert [len(o["token_ids"]) for o in outs] == [30, 4, 10]
    late = outs[2]["seq_id"]
    if policy == "continuous":
        assert _first_step_of(rec, late) == 6  # joins right after the 5th step
    else:
        assert _first_step_of(rec, late) == 31  # waits for the whole first batch (30 tokens) to drain
    _assert_clean(llm)


def test_bad_arrival_steps(llm):
    with pytest.raises(ValueError, match="arrival_steps"):
        llm.generate([[1], [2]], SamplingParams(), use_tqdm=False, arrival_steps=[0])
    with pytest.raises(ValueError, match="arrival_steps"):
        llm.generate([[1]], SamplingParams(), use_tqdm=False, arrival_steps=[-1])
    _assert_clean(llm)


# ---- clear errors before any work: bad settings, bad model folders --------------------------------------

@pytest.mark.parametrize("setting, value, match", [
    ("enable_prefix_caching", "false", "enable_prefix_caching must be True or False, got 'false'"),
    ("enforce_eager", 1, "enforce_eager must be True or False, got 1"),
    ("cpu_kvcache_gib", "1", "cpu_kvcache_gib must be a number, got '1'"),
    ("gpu_memory_utilization", "0.9", "gpu_memory_utilization must be a number, got '0.9'"),
    ("scheduling_policy", None, "scheduling_policy must be a str, got None"),
])
def test_setting_of_the_wrong_type_is_named(tmp_path, setting, value, match):
    path = make_random_checkpoint(tmp_path)
    with pytest.raises(TypeError, match=match):
        LLM(path, **{setting: value})


def test_model_folder_without_tokenizer_files_is_named(tmp_path):
    path = make_random_checkpoint(tmp_path)
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        (path / name).unlink(missing_ok=True)
    with pytest.raises(ValueError, match=rf"model folder {path} has no tokenizer files: expected tokenizer.json"):
        LLM(path)


def test_config_that_disagrees_with_the_weights_names_the_tensor_and_both_shapes(tmp_path, monkeypatch):
    import json

    from nanovllm_teach.engine import model_runner
    path = make_random_checkpoint(tmp_path)  # intermediate_size 128 in the weights
    config = json.loads((path / "config.json").read_text())
    (path / "config.json").write_text(json.dumps({**config, "intermediate_size": 96}))
    monkeypatch.setattr(model_runner, "load_model", lambda *a: pytest.fail("the weights were loaded first"))
    with pytest.raises(ValueError, match=r"model.safetensors: tensor 'model.layers.0.mlp.down_proj.weight' "
                                         r"has shape \[64, 128\], but .*config.json implies \[64, 96\]"):
        LLM(path)


def test_truncated_safetensors_file_is_named_and_the_trace_file_is_left_alone(tmp_path):
    path = make_random_checkpoint(tmp_path / "ckpt")
    weights = path / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    trace = tmp_path / "run.jsonl"
    trace.write_text("an earlier run\n")
    with pytest.raises(ValueError, match=rf"{weights} is not a readable safetensors file \(truncated or corrupt"):
        LLM(path, trace=trace)
    assert trace.read_text() == "an earlier run\n", "the trace of an earlier run was overwritten"


def test_trace_header_names_the_model_without_a_path(tmp_path):
    import hashlib

    from nanovllm_teach.trace import TraceRecorder
    path = make_random_checkpoint(tmp_path / "my-model")
    rec = TraceRecorder()
    LLM(path, trace=rec, kvcache_block_size=16, max_model_len=256, num_kvcache_blocks=8)
    model = rec.header["model"]
    assert model["name"] == "my-model"
    assert model["config_sha256"] == hashlib.sha256((path / "config.json").read_bytes()).hexdigest()
    assert str(tmp_path) not in json_dumps(rec.header)
    assert str(tmp_path) not in json_dumps([e.stats for e in rec.events if e.event == "ENGINE_INIT"])


def json_dumps(value) -> str:
    import json
    return json.dumps(value, default=str)


def test_throughput_counts_the_tokens_computed_not_nano_vllms_statistic(llm, monkeypatch):
    """A prefix-cached prompt of 40 tokens computes only its uncached tail: nano-vllm's ``num_tokens``
    counts all 41, ``num_batched_tokens`` (what the progress bar's tok/s divides) the computed ones."""
    shared = [11] * 32
    llm.generate([shared + [1]], SamplingParams(temperature=0, max_tokens=1), use_tqdm=False)
    seen = []
    real_step = llm.step
    monkeypatch.setattr(llm, "step", lambda: (real_step(), seen.append(llm.last_step))[0])
    llm.generate([shared + list(range(2, 10))], SamplingParams(temperature=0, max_tokens=1), use_tqdm=False)
    prefill = seen[0]
    assert prefill.num_tokens == 41 and prefill.num_batched_tokens == 8  # 2 blocks of 16 came from the cache


def test_run_workload_on_the_real_engine_keeps_the_wall_clock_and_the_lengths(llm):
    from nanovllm_teach.workload.requests import Request

    workload = [Request(0.0, [1, 2, 3, 4, 5], output_len=6), Request(0.3, [7, 8, 9], output_len=4, max_tokens=2)]
    result = llm.run_workload(workload)
    first, second = (result.requests[i] for i in sorted(result.requests))
    assert (first.num_output_tokens, second.num_output_tokens) == (6, 2)  # ignore_eos: the drawn lengths
    assert first.finish_reason == second.finish_reason == "length"
    assert second.arrival_s - first.arrival_s == pytest.approx(0.3)
    assert second.first_token_s > second.arrival_s and result.duration_s >= 0.3  # it waited for the arrival
    assert first.ttft_s > 0 and first.tpot_s > 0 and result.steps_by_bound == {}  # no prediction on a real run
    _assert_clean(llm)
    seq_id = llm.add_request([1, 2, 3])
    with pytest.raises(ValueError, match="run_workload"):
        llm.run_workload(workload)
    llm.abort_request(seq_id)
    _assert_clean(llm)
