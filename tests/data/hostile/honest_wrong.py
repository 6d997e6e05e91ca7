def decode_slot(seq, block_size):
    return seq.block_table[-1] * block_size + seq.num_tokens % block_size
