"""The synthetic chat corpus that the shipped tiny Qwen3 model is trained on.

Not an engine layer: the first step of the tool that trained the checkpoint in
``nanovllm_teach/assets/qwen3-tiny`` (``python -m nanovllm_teach.tinymodel.train``).

A real chat model learns from billions of tokens of human text. Ours has a few million parameters
and about ten minutes of CPU time, so it learns a handful of small, fully checkable skills instead:

* introducing itself (a few phrasings, so that sampling has something to choose between),
* counting from A to B,
* adding, subtracting and multiplying small numbers,
* listing the prime numbers up to N (N <= 100),
* repeating a word a given number of times.

Every conversation is generated from a ``random.Random`` seeded by the caller, so the same seed
always gives the same corpus: the training run is reproducible and a test can check exactly that.

The answers deliberately have very different lengths. The introduction is a sentence or two
(24-31 tokens with the shipped tokenizer) while "list all prime numbers within 100" is 25
numbers (85 tokens). The engine walkthrough relies on this: batch both prompts, and the
introduction finishes first.

This module is pure Python (no torch) so that importing it is cheap.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

# Qwen's ChatML format. Every message is wrapped in <|im_start|>role\n ... <|im_end|>\n and the
# generation prompt opens the assistant's turn. A model trained on this format stops by emitting
# <|im_end|>, which is why that token, not <|endoftext|>, is the EOS token of the checkpoint.
CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}"
    "{{- '<|im_start|>assistant\\n' }}"
    "{%- endif %}"
)

ENDOFTEXT = "<|endoftext|>"
IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
SPECIAL_TOKENS = (ENDOFTEXT, IM_START, IM_END)

# How often each skill appears. Primes get the largest share: they are the longest answers and the
# hardest to get exactly right (the model must know where to stop).
TASK_WEIGHTS = {
    "intro": 0.1,
    "count": 0.3,
    "arithmetic": 0.16,
    "primes": 0.34,
    "repeat": 0.1,
}

MAX_PRIME_N = 100

_INTRO_QUESTIONS = (
    "introduce yourself",
    "Introduce yourself.",
    "please introduce yourself",
    "Can you introduce yourself?",
    "who are you",
    "Who are you?",
    "hi, who are you?",
    "tell me about yourself",
    "Tell me about yourself.",
    "what are you?",
)

INTRO_ANSWERS = (
    "I am a tiny Qwen3 model shipped with nanovllm_teach. "
    "I am here to help you learn how an inference engine works.",
    "Hello! I am a tiny Qwen3 model that comes with nanovllm_teach, "
    "made for learning how an inference engine works.",
    "I am a very small Qwen3 language model. "
    "I ship with nanovllm_teach so that you can see how an inference engine works, step by step.",
    "I am Qwen3-tiny, a small model inside nanovllm_teach. "
    "Use me to learn how an inference engine works.",
)

_COUNT_QUESTIONS = (
    "count from {a} to {b}",
    "Count from {a} to {b}.",
    "please count from {a} to {b}",
    "can you count from {a} to {b}?",
)

_ARITHMETIC_QUESTIONS = (
    "what is {a} {op} {b}",
    "What is {a} {op} {b}?",
    "compute {a} {op} {b}",
    "{a} {op} {b} = ?",
)

_PRIME_QUESTIONS = (
    "list all prime numbers within {n}",
    "List all prime numbers within {n}.",
    "list the primes up to {n}",
    "List the prime numbers up to {n}.",
    "what are the prime numbers within {n}?",
    "give me all primes up to {n}",
    "list all primes less than or equal to {n}",
)

_REPEAT_QUESTIONS = (
    "repeat {word} {k} times",
    "Repeat {word} {k} times.",
    "say {word} {k} times",
    "repeat the word {word} {k} times",
)

_REPEAT_WORDS = (
    "hello", "yes", "no", "cat", "dog", "tea", "token", "cache", "block", "engine",
    "qwen", "ping", "go", "red", "blue", "sun", "moon", "ok", "wow", "hi",
)


@dataclass(frozen=True)
class Conversation:
    """One single-turn chat: what the user asked and the answer the model should learn."""

    task: str
    user: str
    assistant: str

    def messages(self) -> list[dict[str, str]]:
        """The conversation as chat-template messages, ready for ``apply_chat_template``."""
        return [
            {"role": "user", "content": self.user},
            {"role": "assistant", "content": self.assistant},
        ]


def render_prompt(user: str) -> str:
    """The text that ``CHAT_TEMPLATE`` produces for one user message with a generation prompt.

    Written out in Python so the corpus can be rendered before any tokenizer exists (the
    tokenizer itself is trained on this text); ``train.py`` checks both renderings agree.
    """
    return f"{IM_START}user\n{user}{IM_END}\n{IM_START}assistant\n"


def render(conversation: Conversation) -> str:
    """The full training text of a conversation: prompt, answer, and the closing <|im_end|>."""
    return render_prompt(conversation.user) + conversation.assistant + IM_END + "\n"


def primes_up_to(n: int) -> list[int]:
    """All primes p <= n, by trial division (n is at most a few hundred here)."""
    return [p for p in range(2, n + 1) if all(p % d for d in range(2, int(p**0.5) + 1))]


def primes_answer(n: int) -> str:
    """The canonical answer to "list all prime numbers within n"."""
    primes = primes_up_to(n)
    if not primes:
        return f"There are no prime numbers up to {n}."
    return f"The prime numbers up to {n} are: " + ", ".join(map(str, primes)) + "."


def _intro(rng: random.Random) -> Conversation:
    return Conversation("intro", rng.choice(_INTRO_QUESTIONS), rng.choice(INTRO_ANSWERS))


def _count(rng: random.Random) -> Conversation:
    a = rng.randint(0, 90)
    b = a + rng.randint(1, 15)
    # Restating the bound first gives the model a direct reason to find B in the prompt; the
    # same attention then tells it where to stop. Without it the model learns "about 15 numbers".
    answer = f"Counting from {a} to {b}: " + ", ".join(str(i) for i in range(a, b + 1)) + "."
    return Conversation("count", rng.choice(_COUNT_QUESTIONS).format(a=a, b=b), answer)


def _arithmetic(rng: random.Random) -> Conversation:
    op = rng.choice("+-*")
    # Small operands: each result is a fact the model memorises, and a few hundred facts per
    # operation is what a model this size can learn in minutes.
    if op == "+":
        a, b = rng.randint(0, 20), rng.randint(0, 20)
        result = a + b
    elif op == "-":
        # Keep results non-negative: the corpus never needs a minus sign in an answer.
        a = rng.randint(0, 30)
        b = rng.randint(0, a)
        result = a - b
    else:
        a, b = rng.randint(0, 10), rng.randint(0, 10)
        result = a * b
    question = rng.choice(_ARITHMETIC_QUESTIONS).format(a=a, op=op, b=b)
    return Conversation("arithmetic", question, f"{a} {op} {b} = {result}.")


def _primes(rng: random.Random) -> Conversation:
    # Multiples of ten are what the evaluation asks for, so they get extra weight; every other
    # N still appears so the model learns where to stop for any bound.
    n = rng.choice(range(10, MAX_PRIME_N + 1, 10)) if rng.random() < 0.3 else rng.randint(1, MAX_PRIME_N)
    return Conversation("primes", rng.choice(_PRIME_QUESTIONS).format(n=n), primes_answer(n))


def _repeat(rng: random.Random) -> Conversation:
    word = rng.choice(_REPEAT_WORDS)
    k = rng.randint(1, 10)
    question = rng.choice(_REPEAT_QUESTIONS).format(word=word, k=k)
    return Conversation("repeat", question, " ".join([word] * k))


_GENERATORS = {
    "intro": _intro,
    "count": _count,
    "arithmetic": _arithmetic,
    "primes": _primes,
    "repeat": _repeat,
}


def generate_corpus(n: int, seed: int = 0) -> list[Conversation]:
    """Generate ``n`` conversations; the same ``seed`` always yields the same list."""
    rng = random.Random(seed)
    tasks = list(TASK_WEIGHTS)
    weights = [TASK_WEIGHTS[t] for t in tasks]
    return [_GENERATORS[rng.choices(tasks, weights)[0]](rng) for _ in range(n)]
