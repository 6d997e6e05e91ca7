"""Two languages, from one source: which language a learner reads, and text that exists in both.

Everything a learner reads exists in English and Chinese side by side where it is written: a ``Text`` holds
both (``Text(en="...", zh="...")``), and ``say(text)`` picks one; a notebook prints its own lines with
``tell(en, zh)``. Which one is, in this order:

1. the language asked for by name (a ``lang=`` argument, the CLI's ``--lang``, a notebook's first cell,
   which calls ``set_lang``);
2. the environment variable ``NANOVLLM_TEACH_LANG`` (``en`` or ``zh``);
3. the locale (``LC_ALL``, ``LC_MESSAGES`` or ``LANG`` beginning with ``zh``: Chinese);
4. English.

The notebooks are written the same way, in one source each (``notebooks/src/``), and built into an
English and a Chinese notebook (``i18n/notebooks.py``); the terms of the field are in one glossary
(``i18n/glossary.py``), which a test holds every Chinese text to.

Pure Python: the trace and picture layers use it too. Emits no events.
"""

from __future__ import annotations

import os
import string
from collections.abc import Iterator
from contextlib import contextmanager

import msgspec

LANGS = ("en", "zh")
ENV_VAR = "NANOVLLM_TEACH_LANG"

_chosen: str | None = None  # set_lang's choice, for this process


class Text(msgspec.Struct, frozen=True):
    """One sentence (or a ``str.format`` template) in both languages."""

    en: str
    zh: str

    def __post_init__(self) -> None:
        if _fields(self.en) != _fields(self.zh):
            raise ValueError(f"the two languages of a text must use the same fields: {self.en!r} / {self.zh!r}")

    def in_lang(self, lang: str | None = None) -> str:
        return self.zh if resolve_lang(lang) == "zh" else self.en

    def format(self, lang: str | None = None, /, **values: object) -> str:
        return self.in_lang(lang).format(**values)


def _fields(template: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(template) if name is not None}


# The one error of this module a learner can meet: a language asked for by a name this course does not speak.
BAD_LANG = Text(en="{name} must be one of {choices}, got {value!r}",
                zh="{name} 必须是 {choices} 之一，收到的是 {value!r}")


def check_lang(lang: str) -> str:
    if lang not in LANGS:
        raise ValueError(say(BAD_LANG, name="lang", choices=", ".join(LANGS), value=lang))
    return lang


def set_lang(lang: str | None) -> None:
    """The language for the rest of this process (None: back to the environment and the locale)."""
    global _chosen
    _chosen = None if lang is None else check_lang(lang)


@contextmanager
def speaking(lang: str | None) -> Iterator[None]:
    """``lang`` inside the block (None: no change), the language before it after."""
    global _chosen
    before = _chosen
    if lang is not None:
        set_lang(lang)
    try:
        yield
    finally:
        _chosen = before


def resolve_lang(lang: str | None = None) -> str:
    """``lang`` if given, else ``set_lang``'s choice, ``NANOVLLM_TEACH_LANG``, the locale, English."""
    if lang is not None:
        return check_lang(lang)
    if _chosen is not None:
        return _chosen
    env = os.environ.get(ENV_VAR)
    if env:
        if env not in LANGS:
            # The variable that chooses the language is the mistake: the locale chooses the message's.
            raise ValueError(say(BAD_LANG, _locale_lang(), name=ENV_VAR, choices=", ".join(LANGS), value=env))
        return env
    return _locale_lang()


def _locale_lang() -> str:
    """The locale's language: ``zh`` where ``LC_ALL``, ``LC_MESSAGES`` or ``LANG`` begins with ``zh``."""
    for name in ("LC_ALL", "LC_MESSAGES", "LANG"):
        value = os.environ.get(name)
        if value:
            return "zh" if value.lower().startswith("zh") else "en"
    return "en"


def say(text: Text | str, lang: str | None = None, /, **values: object) -> str:
    """``text`` in the language (a plain ``str`` is said as it is: a name, a number)."""
    if isinstance(text, str):
        return text.format(**values) if values else text
    return text.format(lang, **values)


def tell(en: str, zh: str, /) -> None:
    """Print ``en`` or ``zh``, in the language: a notebook's own line, its values already in (two f-strings
    side by side read as the line they print). The package's own sentences are ``Text`` and ``say``."""
    print(zh if resolve_lang() == "zh" else en)
