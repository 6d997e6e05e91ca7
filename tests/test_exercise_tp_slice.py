"""The ``tp_slice`` exercise: the slice of a weight a tensor-parallel rank holds.

The engine's own loading (the reference) gives every rank of 1, 2 and 4 ranks shards that reassemble each
checkpoint tensor exactly, a row-parallel bias on rank 0 only; ``acting_as`` builds a rank without a process
group and refuses a rank outside the group. Then the grader: classic wrong solutions fail naming the rank,
the tensor and the first slice taken differently, in numbers (off by one, forgetting the rank, the wrong
dimension of a row-parallel weight, the bias on every rank, q/k/v packed as if the key/value projections
were as large as the query's, k and v swapped); the engine's own function is not available inside the
sandbox; a function that never returns is stopped; a notebook that patched the engine's own function is
graded against the engine on disk; the verdict is said in Chinese with the same numbers; and
``nanovllm-teach grade tp_slice CLASS/`` grades a small class. (The reference passing and the template
failing are checked for every exercise in ``test_exercises.py``.) The graded model is ``GRADED_CONFIG``'s:
q_proj has 32 rows, k_proj and v_proj 16, o_proj and down_proj 16 rows of 32 and 32 columns, gate_proj and
up_proj 32 rows.
"""

from __future__ import annotations

import csv
import re
import textwrap

import pytest
import torch
from safetensors.torch import load_file

from nanovllm_teach.cli import main
from nanovllm_teach.exercises import EXERCISES, check, grade
from nanovllm_teach.exercises.tp_slice.grading import GRADED_CONFIG, WORLD_SIZES, reference_run, write_checkpoint
from nanovllm_teach.i18n import speaking
from nanovllm_teach.layers.linear import RowParallelLinear
from nanovllm_teach.layers.parallel import acting_as, tp_rank, tp_size

pytestmark = pytest.mark.usefixtures("no_language_chosen")

SOLUTION = EXERCISES["tp_slice"].solution_path.read_text()


def _solution(tmp_path, name: str, source: str):
    path = tmp_path / f"{name}.py"
    path.write_text(textwrap.dedent(source))
    return path


def _changed(old: str, new: str) -> str:
    """The reference solution with one line changed: a planted bug."""
    assert old in SOLUTION
    return SOLUTION.replace(old, new)


def test_the_graded_model_has_grouped_query_attention_biases_and_whole_heads_on_four_ranks():
    heads, kv_heads = GRADED_CONFIG["num_attention_heads"], GRADED_CONFIG["num_key_value_heads"]
    assert kv_heads < heads and heads % max(WORLD_SIZES) == kv_heads % max(WORLD_SIZES) == 0
    assert GRADED_CONFIG["attention_bias"] and WORLD_SIZES == (1, 2, 4)


def test_every_ranks_shards_reassemble_each_checkpoint_tensor(tmp_path):
    write_checkpoint(tmp_path)
    full = load_file(str(tmp_path / "model.safetensors"))
    q = full["model.layers.0.self_attn.q_proj.weight"].shape[0]
    kv = full["model.layers.0.self_attn.k_proj.weight"].shape[0]
    inter = full["model.layers.0.mlp.gate_proj.weight"].shape[0]
    run = reference_run()
    for world in WORLD_SIZES:
        ranks = [run.tensors[(world, rank)] for rank in range(world)]
        for kind in ("weight", "bias"):
            parts = [r[f"self_attn.qkv_proj.{kind}"].split([q // world, kv // world, kv // world]) for r in ranks]
            for k, name in enumerate(("q_proj", "k_proj", "v_proj")):
                assert torch.equal(torch.cat([p[k] for p in parts]), full[f"model.layers.0.self_attn.{name}.{kind}"])
        parts = [r["mlp.gate_up_proj.weight"].split([inter // world] * 2) for r in ranks]
        for k, name in enumerate(("gate_proj", "up_proj")):
            assert torch.equal(torch.cat([p[k] for p in parts]), full[f"model.layers.0.mlp.{name}.weight"])
        for name in ("self_attn.o_proj", "mlp.down_proj"):
            assert torch.equal(torch.cat([r[f"{name}.weight"] for r in ranks], dim=1),
                               full[f"model.layers.0.{name}.weight"])
        bias = full["model.layers.0.self_attn.o_proj.bias"]
        assert torch.equal(ranks[0]["self_attn.o_proj.bias"], bias), "rank 0 adds the row-parallel bias"
        assert all(not r["self_attn.o_proj.bias"].any() for r in ranks[1:]), "and no other rank adds it again"


def test_acting_as_builds_a_rank_without_a_process_group_and_refuses_a_rank_outside_it():
    with acting_as(3, 4):
        assert (tp_rank(), tp_size()) == (3, 4)
        layer = RowParallelLinear(32, 16, bias=True)
        with acting_as(0, 2):
            assert (tp_rank(), tp_size()) == (0, 2)
        assert (tp_rank(), tp_size()) == (3, 4)
    assert (tp_rank(), tp_size()) == (0, 1)
    assert layer.weight.shape == (16, 8) and (layer.tp_rank, layer.tp_size) == (3, 4)
    for rank, world, match in ((2, 2, "rank must be an int from 0 to 1, not 2"), (0, 0, "world_size must be a "
                                                                                         "positive int, not 0")):
        with pytest.raises(ValueError, match=match):
            with acting_as(rank, world):
                pass


# (the planted bug, what the verdict must say)
WRONG = {
    "off_by_one": (
        _changed("return 0, tp_rank * rows, rows, packed_before",
                 "return 0, tp_rank * rows + 1, rows - 1, packed_before"),
        "on rank 0 of 1, mlp.gate_proj.weight (shape [32, 16], packed in gate_up_proj: parts=[32, 32], part=0):\n"
        "  you took rows [1:32] of it, put at rows [0:31] of the rank's mlp.gate_up_proj.weight;\n"
        "  the reference took rows [0:32] of it, put at rows [0:32] of the rank's mlp.gate_up_proj.weight"),
    "forgetting_the_rank": (
        _changed("return 1, tp_rank * columns, columns, 0", "return 1, 0, columns, 0"),
        "on rank 1 of 2, mlp.down_proj.weight (shape [16, 32]):\n  you took columns [0:16] of it, put at columns "
        "[0:16] of the rank's mlp.down_proj.weight;\n  the reference took columns [16:32] of it, put at columns "
        "[0:16] of the rank's mlp.down_proj.weight"),
    "row_parallel_split_by_rows": (
        _changed("columns = shape[1] // tp_size\n        return 1, tp_rank * columns, columns, 0",
                 "rows = shape[0] // tp_size\n        return 0, tp_rank * rows, rows, 0"),
        "on rank 0 of 2, loading mlp.down_proj.weight, the engine failed on what your code gave it: RuntimeError: "
        "The size of tensor a (16) must match the size of tensor b (32) at non-singleton dimension 1\n  your "
        "rank_slice returned [0, 0, 8, 0] for mlp.down_proj.weight (shape [16, 32]); the rank's "
        "mlp.down_proj.weight has shape [16, 16]"),
    "the_bias_on_every_rank": (
        _changed("    if tp_rank == 0:  # a row-parallel bias", "    if True:  # a row-parallel bias"),
        "on rank 1 of 2, self_attn.o_proj.bias (shape [16]):\n  you took entries [0:16] of it, put at entries "
        "[0:16] of the rank's self_attn.o_proj.bias;\n  the reference took none of it (the rank's "
        "self_attn.o_proj.bias holds zeros)"),
    "kv_as_large_as_q": (
        _changed("packed_before = sum(parts[:part]) // tp_size", "packed_before = part * parts[0] // tp_size"),
        "on rank 0 of 1, loading self_attn.v_proj.bias, the engine failed on what your code gave it: RuntimeError: "
        "start (64) + length (16) exceeds dimension size (64).\n  your rank_slice returned [0, 0, 16, 64] for "
        "self_attn.v_proj.bias (shape [16]); the rank's self_attn.qkv_proj.bias has shape [64]"),
    "k_and_v_swapped": (
        _changed("packed_before = sum(parts[:part]) // tp_size",
                 "packed_before = sum(parts[:{1: 2, 2: 1}.get(part, part) if len(parts) == 3 else part]) // tp_size"),
        "on rank 0 of 1, self_attn.k_proj.bias (shape [16], packed in qkv_proj: parts=[32, 16, 16], part=1):\n"
        "  you took entries [0:16] of it, put at entries [48:64] of the rank's "
        "self_attn.qkv_proj.bias;\n  the reference took entries [0:16] of it, put at entries [32:48] of the rank's "
        "self_attn.qkv_proj.bias"),
}


@pytest.mark.parametrize("name", list(WRONG))
def test_a_wrong_slice_fails_naming_the_rank_the_tensor_and_both_slices(tmp_path, name):
    source, said = WRONG[name]
    result = grade("tp_slice", _solution(tmp_path, name, source))
    assert not result.passed and result.isolated is True
    assert _torchs_words_out(result.message) == _torchs_words_out(f"FAIL tp_slice: {said}")


def _torchs_words_out(message: str) -> str:
    """The verdict without what torch said of a slice that did not fit (its words are torch's to change)."""
    return re.sub(r"RuntimeError: [^\n]*", "RuntimeError: ...", message)


def test_the_verdict_is_said_in_chinese_with_the_same_numbers(tmp_path):
    path = _solution(tmp_path, "rank", WRONG["forgetting_the_rank"][0])
    with speaking("zh"):
        zh = grade("tp_slice", path).message
    assert zh == ("FAIL tp_slice: 在 2 个 rank 中的 rank 1 上，mlp.down_proj.weight（形状 [16, 32]）：\n"
                  "  你取了它的 [0:16] 列，放在这个 rank 的 mlp.down_proj.weight 的 [0:16] 列；\n"
                  "  参考实现取了它的 [16:32] 列，放在这个 rank 的 mlp.down_proj.weight 的 [0:16] 列")
    en = grade("tp_slice", path).message
    assert sorted(re.findall(r"\d+", en)) == sorted(re.findall(r"\d+", zh))


def test_the_engines_own_rank_slice_is_not_available_while_grading(tmp_path):
    result = grade("tp_slice", _solution(tmp_path, "borrowed", """
        from nanovllm_teach.layers.rank_slice import rank_slice as engines

        def rank_slice(kind, shape, parts, part, tp_size, tp_rank):
            return engines(kind, shape, parts, part, tp_size, tp_rank)
        """))
    assert not result.passed and result.isolated is True
    assert result.message.startswith("FAIL tp_slice: on rank 0 of 1, loading mlp.down_proj.weight, your rank_slice "
                                     "raised RuntimeError: the engine's own rank_slice is not available while "
                                     "grading: write your own code"), result.message


def test_a_rank_slice_that_never_returns_is_stopped_and_a_notebook_function_is_graded():
    def forever(kind, shape, parts, part, tp_size, tp_rank):
        while True:
            pass

    result = check("tp_slice", forever, time_limit=1)
    assert result.message == ("FAIL tp_slice: on rank 0 of 1, loading mlp.down_proj.weight, your rank_slice did not "
                              "return within 1 s: the grader stopped it")
    exec(compile(SOLUTION, "mine.py", "exec"), names := {})
    assert check("tp_slice", names["rank_slice"]).passed


def test_a_notebook_that_patched_the_engines_rank_slice_is_graded_against_the_engine_on_disk(monkeypatch):
    from nanovllm_teach.exercises.tp_slice import grading as shard_grading
    from nanovllm_teach.layers import rank_slice

    def nothing(kind, shape, parts, part, tp_size, tp_rank):
        return None

    monkeypatch.setattr(shard_grading, "_reference", None)
    monkeypatch.setattr(rank_slice, "rank_slice", nothing)  # recorded here, the reference would agree with it
    result = check("tp_slice", nothing)
    assert result.message.startswith("FAIL tp_slice: on rank 0 of 1, "), result.message
    assert "you took none of it" in result.message


def test_a_class_is_graded_from_the_command_line(tmp_path, capsys):
    room = tmp_path / "class"
    room.mkdir()
    (room / "alice.py").write_text(SOLUTION)
    (room / "bob.py").write_text(WRONG["the_bias_on_every_rank"][0])
    (room / "carol.py").write_text(EXERCISES["tp_slice"].template_path.read_text())
    (room / "dave.py").write_text("def rank_slice(kind, shape, parts, part, tp_size, tp_rank)\n    return None\n")
    assert main(["grade", "tp_slice", str(room), "--jobs", "2", "--csv", str(tmp_path / "grades.csv")]) == 0
    rows = {row["student"]: row for row in csv.DictReader((tmp_path / "grades.csv").open(encoding="utf-8-sig"))}
    assert [rows[name]["verdict"] for name in ("alice", "bob", "carol", "dave")] == [
        "PASS", "FAIL", "FAIL", "FAIL"]
    assert "on rank 1 of 2, self_attn.o_proj.bias" in rows["bob"]["reason"]
    assert "you have not implemented rank_slice yet" in rows["carol"]["reason"]
    assert "your file could not be loaded: SyntaxError" in rows["dave"]["reason"]
    assert rows["alice"]["score"] == "1" and rows["bob"]["score"] == "0"
    assert capsys.readouterr().out.splitlines()[-1] == "4 graded: 1 PASS, 3 FAIL, 0 ERROR"
