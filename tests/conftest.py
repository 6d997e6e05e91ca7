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


# Set by .ci/run, which installs bubblewrap and runs as root: there a grading sandbox that is missing, or that
# cannot drop to a slot's user id, fails the tests that need it instead of skipping them (a skipped
# protection is no protection).
REQUIRE_BWRAP = os.environ.get("NANOVLLM_TEACH_REQUIRE_BWRAP") == "1"


def _sandbox_missing(reason: str) -> None:
    message = f"{reason}: nanovllm-teach grade --check-isolation says what this machine gives"
    if REQUIRE_BWRAP:
        pytest.fail(f"NANOVLLM_TEACH_REQUIRE_BWRAP=1 but {message}", pytrace=False)
    pytest.skip(message)


@pytest.fixture(scope="session")
def bwrap_ready():
    """bubblewrap starts here; else the test skips, or fails under ``NANOVLLM_TEACH_REQUIRE_BWRAP=1``."""
    from nanovllm_teach.exercises import isolation

    if not isolation.available():
        _sandbox_missing("no usable bubblewrap (Debian/Ubuntu: apt-get install bubblewrap)")


@pytest.fixture(scope="session")
def uid_drop_ready(bwrap_ready):
    """bubblewrap starts and each submission runs as a slot's own user id (root: a class can be graded); else
    the test skips, or fails under ``NANOVLLM_TEACH_REQUIRE_BWRAP=1``."""
    from nanovllm_teach.exercises import isolation

    missing = isolation.uid_drop_missing()
    if missing is not None:
        _sandbox_missing(f"no uid drop ({missing})")
