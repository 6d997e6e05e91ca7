"""The tiny Qwen3 model that ships with nanovllm_teach: its training corpus and the tool that trained it.

Not an engine layer: this package produced the checkpoint in ``nanovllm_teach/assets/qwen3-tiny``.
``corpus`` generates the synthetic chat conversations (pure Python, cheap to import);
``tokenizer``, ``config``, ``training``, ``evaluation``, ``checkpoint`` and ``model_card`` are the
steps of the training run, and ``train`` is its entry point, which runs them in order and
writes the checkpoint. Only the corpus is imported here, so ``import nanovllm_teach.tinymodel``
does not pull in torch or transformers; run the training with::

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
