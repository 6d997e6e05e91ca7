import os

# The Hub is unreachable by design: everything must come from the package or the test's own files.
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# Before any test module imports torch (which imports triton): Triton decides interpreted-or-compiled when
# it decorates a function, its own helpers included, and on a CPU its kernels run only interpreted.
os.environ["TRITON_INTERPRET"] = "1"
# The tests read English unless they ask for Chinese: the tester's locale must not choose for them.
os.environ["NANOVLLM_TEACH_LANG"] = "en"


import pytest  # noqa: E402  (after the environment above, which must be set before anything imports torch)


@pytest.fixture
def no_language_chosen(monkeypatch):
    """Neither the environment nor the locale chooses a language, and no ``set_lang`` is in force: a test of
    how the language is chosen starts from nothing (``pytestmark = pytest.mark.usefixtures(...)``)."""
    from nanovllm_teach import i18n

    for name in (i18n.ENV_VAR, "LC_ALL", "LC_MESSAGES", "LANG"):
        monkeypatch.delenv(name, raising=False)
    i18n.set_lang(None)
    yield
    i18n.set_lang(None)
