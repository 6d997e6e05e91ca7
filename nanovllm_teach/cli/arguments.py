"""Command line: what every command checks in its arguments before any work, and how a mistake is reported.

A mistake in what was asked (a missing or damaged file, a folder where a file belongs, an output that
cannot be written, a bad value) raises ``UsageError`` (or ``ValueError`` from whoever refused the value);
``report_mistake`` turns it into one line, ``nanovllm-teach: error: ...``, and exit status 2, and
``CommandParser`` does the same for argparse's own messages (and takes no abbreviated option). Outputs are
checked before any work starts: ``writable_file`` and ``writable_folder`` create what they check and remove
it again. A picture's format follows its suffix (``PICTURE_FORMATS``, ``save_picture``).

``--help`` speaks the learner's language: the parser is built inside ``speaking(language_asked(argv))``,
each help text a ``Text`` said where its option is added, and ``CommandParser`` says argparse's own
headings (usage, the sections, the ``-h`` line) the same way.

The texts a learner reads are ``Text`` constants in both languages, argparse's own messages about a mistake
among them: ``CommandParser.error`` matches each against ``ARGPARSE_MESSAGES`` (their English is argparse's
own wording, the same in Python 3.10 to 3.12) and says it in the learner's language; a message it does not
know stays as argparse wrote it.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import Any

import wcwidth

from nanovllm_teach.i18n import ENV_VAR, LANGS, Text, say
from nanovllm_teach.trace.payload import printable

PROG = "nanovllm-teach"
PICTURE_FORMATS = (".png", ".svg", ".pdf")
USAGE_EXIT_STATUS = 2

IS_A_FOLDER_GIVE_A_FILE = Text(en="{option} {path} is a folder: give a file name",
                               zh="{option} {path} 是一个文件夹：请给出文件名")
PICTURE_SUFFIX = Text(en="{option} {path}: the picture format follows the suffix; use one of {formats}",
                      zh="{option} {path}：图片格式由后缀决定，请用 {formats} 之一")
CANNOT_BE_WRITTEN = Text(en="{option} {path} cannot be written: {why}", zh="{option} {path} 无法写入：{why}")
CANNOT_WRITE = Text(en="cannot write {path}: {why}", zh="无法写入 {path}：{why}")  # a path no option names
IS_A_FILE_NOT_A_FOLDER = Text(en="{option} {path} is a file, not a folder", zh="{option} {path} 是文件，不是文件夹")
CANNOT_BE_CREATED = Text(en="{option} {path} cannot be created: {why}", zh="{option} {path} 无法创建：{why}")
NO_MODEL_FOLDER = Text(en="--model {path}: no such folder (give a checkpoint folder with a config.json)",
                       zh="--model {path}：没有这个文件夹（请给出含 config.json 的 checkpoint 文件夹）")
UNKNOWN_EXERCISE = Text(en="unknown exercise {name!r}; choose from: {names}", zh="没有练习 {name!r}；可选：{names}")
SEE_HELP = Text(en="(see {prog} --help)", zh="（见 {prog} --help）")
USAGE = Text(en="usage: ", zh="用法：")
POSITIONALS = Text(en="positional arguments", zh="位置参数")
OPTIONS = Text(en="options", zh="选项")
SHOW_HELP = Text(en="show this help message and exit", zh="显示本帮助并退出")
EXERCISE_NAME_HELP = Text(en="the exercise's name (see: nanovllm-teach exercises)",
                          zh="练习的名字（见：nanovllm-teach exercises）")
MODEL_FOLDER_HELP = Text(en="checkpoint folder (default: the shipped model)", zh="checkpoint 文件夹（默认：自带的模型）")
ENGINE_SETTINGS = Text(en="the engine (the settings of LLM(...))", zh="引擎（LLM(...) 的设置）")
LANG_HELP = Text(en="language of what it writes (default: ${env}, else the locale, else en)",
                 zh="输出所用的语言（默认：${env}，其次是系统 locale，最后是 en）")


# argparse's messages about a mistake, as patterns over its English, each with what a learner reads instead.
# "argument --x: " comes first, then what is wrong with it.
_ARGUMENT = r"argument (?P<argument>\S+(?:/\S+)?): "
ARGPARSE_MESSAGES: tuple[tuple[re.Pattern[str], Text], ...] = tuple((re.compile(pattern), text) for pattern, text in (
    (r"the following arguments are required: (?P<names>.+)",
     Text(en="the following arguments are required: {names}", zh="缺少必需的参数：{names}")),
    (r"unrecognized arguments: (?P<words>.+)", Text(en="unrecognized arguments: {words}", zh="无法识别的参数：{words}")),
    (r"one of the arguments (?P<names>.+) is required",
     Text(en="one of the arguments {names} is required", zh="参数 {names} 中必须给出一个")),
    (_ARGUMENT + r"invalid choice: (?P<value>.+?) \(choose from (?P<choices>.+)\)",
     Text(en="argument {argument}: invalid choice: {value} (choose from {choices})",
          zh="参数 {argument}：{value} 不是可选的值（可选：{choices}）")),
    (_ARGUMENT + r"invalid (?P<kind>.+) value: (?P<value>.+)",
     Text(en="argument {argument}: invalid {kind} value: {value}", zh="参数 {argument}：{value} 不是有效的 {kind} 值")),
    (_ARGUMENT + r"expected one argument", Text(en="argument {argument}: expected one argument",
                                                zh="参数 {argument}：后面需要一个值")),
    (_ARGUMENT + r"expected at least one argument", Text(en="argument {argument}: expected at least one argument",
                                                         zh="参数 {argument}：后面至少需要一个值")),
    (_ARGUMENT + r"not allowed with argument (?P<other>.+)",
     Text(en="argument {argument}: not allowed with argument {other}",
          zh="参数 {argument}：不能和参数 {other} 一起用")),
    (_ARGUMENT + r"must be >= (?P<least>\S+), got (?P<value>.+)",  # positive_int, number_at_least_zero
     Text(en="argument {argument}: must be >= {least}, got {value}", zh="参数 {argument}：必须 >= {least}，收到的是 {value}")),
))


def in_language(message: str) -> str:
    """argparse's ``message`` in the learner's language (as it is when no pattern knows it)."""
    for pattern, text in ARGPARSE_MESSAGES:
        found = pattern.fullmatch(message)
        if found:
            return say(text, **found.groupdict())
    return message


class UsageError(Exception):
    """A mistake in the command line or its files: reported as one line, exit status 2."""


def language_asked(argv: list[str]) -> str | None:
    """The language ``--lang`` names anywhere on the command line ``argv``, or None (the environment and the
    locale decide): read before the parser is built, so that its ``--help`` is in that language. A value
    that is no language is left for the parser to refuse."""
    asked = argparse.ArgumentParser(add_help=False, allow_abbrev=False, exit_on_error=False)
    asked.add_argument("--lang", default=None)
    try:
        lang = asked.parse_known_args(argv)[0].lang
    except argparse.ArgumentError:  # ``--lang`` with no value: the parser says so, in one line
        return None
    return lang if lang in LANGS else None


class _HelpFormatter(argparse.HelpFormatter):
    """argparse's layout, its ``usage:`` in the learner's language and its lines wrapped by the columns they
    take on a terminal: a Chinese character takes two, and argparse's own wrapping (``textwrap``) counts one,
    so its Chinese lines ran past the terminal's edge, and it never broke Chinese, which has no spaces. An
    option's name is kept whole (no break at its hyphens)."""

    def _format_usage(self, usage: str | None, actions: Any, groups: Any, prefix: str | None) -> str:
        # argparse lines the usage's later lines up under its first by the prefix's length: give it one of as
        # many spaces as the prefix takes columns, then put the prefix in their place.
        shown = say(USAGE) if prefix is None else prefix
        columns = wcwidth.width(shown)
        return shown + super()._format_usage(usage, actions, groups, " " * columns)[columns:]

    def _split_lines(self, text: str, width: int) -> list[str]:
        return wcwidth.wrap(" ".join(text.split()), width, break_on_hyphens=False)


class CommandParser(argparse.ArgumentParser):
    """Usage mistakes as one line, like every other mistake; options only by their whole name (``--htm`` is
    refused, not read as ``--html``); ``--help`` in the learner's language, argparse's headings included.
    Every command's parser is one: ``add_subparsers`` makes its parsers of the parent's class."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # An abbreviation that happens to match today may name another option tomorrow, and a typo should
        # be told, not guessed. argparse's own -h says its help in English: ours says it in the language.
        super().__init__(*args, **{"allow_abbrev": False, "formatter_class": _HelpFormatter, **kwargs,
                                   "add_help": False})
        self._positionals.title = say(POSITIONALS)
        self._optionals.title = say(OPTIONS)
        self.add_argument("-h", "--help", action="help", default=argparse.SUPPRESS, help=say(SHOW_HELP))

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(USAGE_EXIT_STATUS, f"{PROG}: error: {in_language(message)} {say(SEE_HELP, prog=self.prog)}\n")


def add_lang_option(parser: argparse.ArgumentParser) -> None:
    """``--lang`` on ``parser``: on the whole command line and on every command, where a learner types it
    (``build check DIR --lang zh``). SUPPRESS: a command's parser leaves an earlier ``--lang`` as it was."""
    parser.add_argument("--lang", choices=LANGS, default=argparse.SUPPRESS, help=say(LANG_HELP, env=ENV_VAR))


def report_mistake(message: str) -> int:
    """Print ``message`` as the one line a mistake gets (its whitespace folded, its control characters
    escaped: it may quote a file) and return the exit status for it."""
    print(f"{PROG}: error: {printable(' '.join(message.split()))}", file=sys.stderr)
    return USAGE_EXIT_STATUS


# ---- values ---------------------------------------------------------------------------------------------

def positive_int(text: str) -> int:
    """argparse ``type=``: an int of at least 1."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def number_at_least_zero(text: str) -> float:
    """argparse ``type=``: a number of at least 0 (NaN refused)."""
    value = float(text)
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text}")
    return value


positive_int.__name__ = "int >= 1"  # argparse names the type in its message: "invalid int >= 1 value"
number_at_least_zero.__name__ = "number >= 0"


# ---- files and folders ----------------------------------------------------------------------------------

def writable_file(path: str, option: str, picture: bool = False) -> Path:
    """``path`` as a file this command can write (created and removed again to find out)."""
    out = Path(path)
    if out.is_dir():
        raise UsageError(say(IS_A_FOLDER_GIVE_A_FILE, option=option, path=path))
    if picture and out.suffix.lower() not in PICTURE_FORMATS:
        raise UsageError(say(PICTURE_SUFFIX, option=option, path=path, formats=", ".join(PICTURE_FORMATS)))
    existed = out.exists()
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        with out.open("ab"):
            pass
        if not existed:
            out.unlink()
    except OSError as error:
        raise UsageError(say(CANNOT_BE_WRITTEN, option=option, path=path, why=error.strerror or error)) from None
    return out


def writable_folder(path: str, option: str) -> Path:
    """``path`` as a folder this command can write files in (created if it is not there)."""
    folder = Path(path)
    if folder.exists() and not folder.is_dir():
        raise UsageError(say(IS_A_FILE_NOT_A_FOLDER, option=option, path=path))
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise UsageError(say(CANNOT_BE_CREATED, option=option, path=path, why=error.strerror or error)) from None
    writable_file(str(folder / ".nanovllm_teach_write_check"), option)
    return folder


def model_folder(path: str | None) -> str | None:
    """``--model``: a checkpoint folder that exists, or ``None`` (the shipped model)."""
    if path is not None and not Path(path).is_dir():
        raise UsageError(say(NO_MODEL_FOLDER, path=path))
    return path


def exercise_named(name: str) -> Any:
    """The classroom exercise called ``name``, or a ``UsageError`` naming every one there is."""
    from nanovllm_teach.exercises import EXERCISES

    if name not in EXERCISES:
        raise UsageError(say(UNKNOWN_EXERCISE, name=name, names=", ".join(EXERCISES)))
    return EXERCISES[name]


def save_picture(figure: Any, path: Path, dpi: float) -> Path:
    """Write a matplotlib ``figure`` to ``path`` (checked by ``writable_file(..., picture=True)``) in the format
    its suffix names."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(figure)
    figure.savefig(path, format=path.suffix.lower().lstrip("."), dpi=dpi)
    return path
