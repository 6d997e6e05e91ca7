import os

# The Hub is unreachable by design: everything must come from the package or the test's own files.
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
