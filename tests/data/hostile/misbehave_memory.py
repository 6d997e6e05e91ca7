# Allocates 30 GB in chunks of 256 MB, each written to.
_chunks = []


def decode_slot(seq, block_size):
    for _ in range(120):
        _chunks.append(b"x" * (256 << 20))
    return 0
