"""Command line: what every command checks in its arguments before any work, and how a mistake is reported.

A mistake in what was asked (a missing or damaged file, a folder where a file belongs, an output that
cannot be written, a bad value) raises ``UsageError`` (or ``ValueError`` from whoever refused the value);
``report_mistake`` turns it into one line, ``nanovllm-teach: error: ...``, and exit status 2, and
``CommandParser`` does the same for argparse's own messages (and takes no abbreviated option). Outputs
are checked before any work starts: ``writable_file`` and ``writable_folder`` create what they check and
remove it again. A picture's format follows its suffix (``PICTURE_FORMATS``, ``save_picture``).

The texts a learner reads are ``Text`` constants in both languages; the ``type=`` parsers' messages are
argparse's, which stay English like the rest of ``--help``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from nanovllm_teach.i18n import Text, say
from nanovllm_teach.trace.payload import printable

PROG = "nanovllm-teach"
PICTURE_FORMATS = (".png", ".svg", ".pdf")
USAGE_EXIT_STATUS = 2

IS_A_FOLDER_GIVE_A_FILE = Text(en="{option} {path} is a folder: give a file name",
                               zh="{option} {path} 是一个文件夹：请给出文件名")
PICTURE_SUFFIX = Text(en="{option} {path}: the picture format follows the suffix; use one of {formats}",
                      zh="{option} {path}：图片格式由后缀决定，请用 {formats} 之一")
CANNOT_BE_WRITTEN = Text(en="{option} {path} cannot be written: {why}", zh="{option} {path} 无法写入：{why}")
IS_A_FILE_NOT_A_FOLDER = Text(en="{option} {path} is a file, not a folder", zh="{option} {path} 是文件，不是文件夹")
CANNOT_BE_CREATED = Text(en="{option} {path} cannot be created: {why}", zh="{option} {path} 无法创建：{why}")
NO_MODEL_FOLDER = Text(en="--model {path}: no such folder (give a checkpoint folder with a config.json)",
                       zh="--model {path}：没有这个文件夹（请给出含 config.json 的 checkpoint 文件夹）")
UNKNOWN_EXERCISE = Text(en="unknown exercise {name!r}; choose from: {names}", zh="没有练习 {name!r}；可选：{names}")
SEE_HELP = Text(en="(see {prog} --help)", zh="（见 {prog} --help）")


class UsageError(Exception):
    """A mistake in the command line or its files: reported as one line, exit status 2."""


class CommandParser(argparse.ArgumentParser):
    """Usage mistakes as one line, like every other mistake; options only by their whole name (``--htm`` is
    refused, not read as ``--html``). Every command's parser is one: ``add_subparsers`` makes its parsers of
    the parent's class."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # An abbreviation that happens to match today may name another option tomorrow, and a typo should
        # be told, not guessed.
        super().__init__(*args, **{"allow_abbrev": False, **kwargs})

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(USAGE_EXIT_STATUS, f"{PROG}: error: {message} {say(SEE_HELP, prog=self.prog)}\n")


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
