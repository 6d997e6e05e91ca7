"""The tiny Qwen3 model that ships with nanovllm_teach: its training corpus and training script.

``corpus`` generates the synthetic chat conversations (pure Python, cheap to import);
``train`` builds the tokenizer, trains the model and writes the checkpoint to
``nanovllm_teach/assets/qwen3-tiny``. Only the corpus is imported here, so ``import
nanovllm_teach.tinymodel`` does not pull in torch or transformers; run the training with::

    python -m nanovllm_teach.tinymodel.train --out nanovllm_teach/assets/qwen3-tiny
"""

from nanovllm_teach.tinymodel.corpus import (
    CHAT_TEMPLATE,
    Conversation,
    generate_corpus,
    primes_answer,
    primes_up_to,
    render,
)

__all__ = ["CHAT_TEMPLATE", "Conversation", "generate_corpus", "primes_answer", "primes_up_to", "render"]
