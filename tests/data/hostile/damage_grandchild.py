# A double-forked, setsid grandchild that empties every later grading folder's trace files for 90 s.
import glob
import os
import tempfile
import time


def _vandal():
    with open(os.path.join(tempfile.gettempdir(), "hostile_grandchild.pid"), "w") as file:
        file.write(str(os.getpid()))
    until = time.monotonic() + 90
    while time.monotonic() < until:
        for path in glob.glob(os.path.join(tempfile.gettempdir(), "nanovllm_teach_grade_*", "*.jsonl")):
            try:
                open(path, "w").close()
            except OSError:
                pass
        time.sleep(0.05)


if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        try:
            _vandal()
        finally:
            os._exit(0)
    os._exit(0)
time.sleep(0.2)  # the grandchild has written its pid


def decode_slot(seq, block_size):
    position = seq.num_tokens - 1
    return seq.block_table[position // block_size] * block_size + position % block_size
