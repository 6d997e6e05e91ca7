"""The ``allocate`` exercise: a new sequence's block table, with reference counts and the prefix-cache chain.

Three classic mistakes, each caught where it first shows in the trace: a reused block that had no holder
left in the free list (the cache hit on a freed-but-hashed block), a reference count set instead of
raised (a block shared by three sequences freed when the first finishes), and an unchained hash (the
second cached block is not found). Expected numbers are read from the reference trace.
"""

from __future__ import annotations

import re

from nanovllm_teach.exercises import EXERCISES, check, grade, reference_trace
from nanovllm_teach.step_workloads import PREFIX_REUSE

SOURCE = EXERCISES["allocate"].solution_path.read_text()


def _buggy(tmp_path, name: str, old: str, new: str):
    source = SOURCE.replace(old, new)
    assert source != SOURCE
    path = tmp_path / f"{name}.py"
    path.write_text(source)
    return path


def _events(name: str, reason: str | None = None, **stats):
    return [e for e in reference_trace(PREFIX_REUSE).events
            if e.event == name and reason in (None, e.reason) and all(e.stats.get(k) == v for k, v in stats.items())]


def test_the_workload_shares_a_block_three_ways_and_hits_freed_blocks():
    hits = _events("PREFIX_CACHE_HIT")
    frees = _events("BLOCK_FREE", reason="finished")
    shared = hits[0].stats["block_ids"][0]
    assert sum(shared in e.stats["block_ids"] for e in hits) >= 2  # two more holders besides the first
    late = hits[-1]  # after every earlier holder finished: its blocks came back out of the free list
    before = [f for f in frees if f.step < late.step][-1]
    assert before.stats["num_free_blocks"] == PREFIX_REUSE.settings["num_kvcache_blocks"]


def test_a_freed_hit_left_in_the_free_list(tmp_path):
    result = grade("allocate", _buggy(tmp_path, "freelist", "            bm.free_block_ids.remove(block_id)\n", ""))
    late = _events("PREFIX_CACHE_HIT")[-1]
    right = _events("BLOCK_ALLOCATE", reason="admit_sequence", seq_id=late.stats["seq_id"])[0]
    assert not result.passed and result.workload == "prefix_reuse"
    assert f"in step {right.step} (BLOCK_ALLOCATE)" in result.message
    assert (f"BLOCK_ALLOCATE.num_free_blocks: you had {right.stats['num_free_blocks'] + len(late.stats['block_ids'])}, "
            f"the reference {right.stats['num_free_blocks']}") in result.message


def test_a_reference_count_set_instead_of_raised(tmp_path):
    result = grade("allocate", _buggy(tmp_path, "refcount", "        block.ref_count += 1\n",
                                      "        block.ref_count = 1\n"))
    first_free = _events("BLOCK_FREE", reason="finished")[0]
    assert not result.passed
    assert f"in step {first_free.step} (BLOCK_FREE)" in result.message
    assert f"BLOCK_FREE.freed_block_ids: you had [" in result.message
    assert f"the reference {first_free.stats['freed_block_ids']}" in result.message


def test_an_unchained_hash_misses_the_second_block(tmp_path):
    result = grade("allocate", _buggy(tmp_path, "unchained", "compute_block_hash(seq.block(i), h)",
                                      "compute_block_hash(seq.block(i))"))
    first_hit = _events("PREFIX_CACHE_HIT")[0]
    assert not result.passed
    assert re.search(rf"in step {first_hit.step}, your allocate raised KeyError: \d+ \(unchained\.py, line \d+",
                     result.message), result.message


def test_a_block_table_the_engine_cannot_use_is_refused_with_a_sentence():
    def allocate(bm, seq, num_cached_blocks):
        seq.block_table = [bm.take_free_block()]  # one block, whatever the sequence needs

    message = check("allocate", allocate).message
    assert re.search(r"your allocate gave seq 0 the block table \[0\] for its 10 tokens, which need 3 different "
                     r"blocks of 4", message), message


def test_hints_say_where_then_how_without_the_code():
    where, how = EXERCISES["allocate"].hint(1), EXERCISES["allocate"].hint(2)
    assert "hash_to_block_id" not in where and "free" in where
    assert "bm.hash_to_block_id" in how and "ref_count" in how and "take_free_block" in how
    assert "seq.block_table = hits + fresh" not in how
