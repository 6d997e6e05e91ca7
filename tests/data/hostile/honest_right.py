def decode_slot(seq, block_size):
    position = seq.num_tokens - 1
    return seq.block_table[position // block_size] * block_size + position % block_size
