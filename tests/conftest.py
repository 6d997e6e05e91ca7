import os

# The Hub is unreachable by design: everything must come from the package or the test's own files.
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# Before any test module imports torch (which imports triton): Triton decides interpreted-or-compiled when
# it decorates a function, its own helpers included, and on a CPU its kernels run only interpreted.
os.environ["TRITON_INTERPRET"] = "1"
# The tests read English unless they ask for Chinese: the tester's locale must not choose for them.
os.environ["NANOVLLM_TEACH_LANG"] = "en"
