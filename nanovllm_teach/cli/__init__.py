"""Command line: the nanovllm-teach command, one module per command or small group of commands.

- ``demo``, ``record`` (``record.py``): run the shipped model on the walkthrough's prompts and say what the
  engine did; record the scenarios of the shipped traces (into ``out/``; ``--out-dir traces`` regenerates them).
- ``replay``, ``compare``, ``diff`` (``traces.py``): a recorded trace as tables, pictures, a replay page or a
  report; two traces side by side; the first event where they disagree (exit 1 if any).
- ``exercises``, ``hint`` (``exercises.py``): the classroom exercises and their hints; ``grade EXERCISE
  PATH...`` (``grade.py``) grades one solution or a class, each submission in a sandbox.
- ``build start DIR``, ``build check DIR [CHAPTER]`` (``track.py``): the build-it-yourself track, a package the
  learner fills in chapter by chapter and its checks against the engine.
- ``simulate`` (``simulate.py``): the same engine on a simulated GPU (``--model qwen3-8b --hardware h100-sxm
  --rate 8``), its trace written for ``replay``/``compare`` like any other.
- ``plan`` (``plan.py``): the cheapest configuration (GPU, TP, replicas, batch limits) that meets a latency SLO
  at a target rate, searched on the simulated engine (on Ray by default).
- ``serve`` (``serve.py``): the engine behind an OpenAI-compatible HTTP API.

Each module adds its commands with ``add_<command>_parser(subparsers)``. A mistake in what was asked ends with
one line, ``nanovllm-teach: error: ...``, and exit status 2 (``arguments.py``; ``simulate``'s and ``plan``'s
own refusals are ``messages.py``'s); outputs are checked before any work starts.

What a command prints for a learner is in the chosen language (``--lang``, else ``NANOVLLM_TEACH_LANG``,
else the locale): ``Text`` constants in each module. Its ``--help`` too: ``main`` reads ``--lang`` first and
builds the parser in that language, each help text a ``Text`` beside its option; argparse's own messages
about a mistake on the command line are said in it too (``arguments.ARGPARSE_MESSAGES``). What a trace or a
model wrote is shown with its control characters escaped, never obeyed by the terminal.
"""

from __future__ import annotations

import argparse
import io
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from nanovllm_teach.cli.arguments import (PROG, CommandParser, UsageError, add_lang_option,
                                          language_asked, report_mistake)
from nanovllm_teach.cli.exercises import add_exercises_parser, add_hint_parser
from nanovllm_teach.cli.grade import add_grade_parser
from nanovllm_teach.cli.plan import add_plan_parser
from nanovllm_teach.cli.record import add_demo_parser, add_record_parser
from nanovllm_teach.cli.serve import add_serve_parser
from nanovllm_teach.cli.simulate import add_simulate_parser
from nanovllm_teach.cli.traces import add_compare_parser, add_diff_parser, add_replay_parser
from nanovllm_teach.cli.track import add_build_parser
from nanovllm_teach.i18n import Text, say, speaking
from nanovllm_teach.trace.payload import printable

# The commands in the order ``--help`` lists them.
COMMANDS = (add_demo_parser, add_record_parser, add_replay_parser, add_compare_parser, add_diff_parser,
            add_exercises_parser, add_hint_parser, add_grade_parser, add_build_parser, add_simulate_parser,
            add_plan_parser, add_serve_parser)


DESCRIPTION = Text(en="Run, record, replay and compare the engine's TEACHING traces, and grade the classroom "
                      "exercises.",
                   zh="运行、录制、回放和比较引擎的 TEACHING trace，并批改课堂练习。")
COMMANDS_TITLE = Text(en="commands", zh="命令")


def build_parser() -> argparse.ArgumentParser:
    """The whole command line: every command, each with ``--lang``; its ``--help`` in the current language
    (``main`` builds it inside ``speaking``)."""
    parser = CommandParser(prog=PROG, description=say(DESCRIPTION))
    add_lang_option(parser)
    parser.set_defaults(lang=None)
    sub = parser.add_subparsers(dest="command", required=True, title=say(COMMANDS_TITLE))
    for add_parser in COMMANDS:
        add_parser(sub)
    for command in sub.choices.values():  # every command speaks the learner's language
        add_lang_option(command)
    return parser


class _Shown(io.TextIOBase):
    """A text stream that writes control characters as their escapes (``printable``), but for the newlines,
    tabs and carriage returns (progress bars) of the CLI's own output: what a trace or a model wrote is shown,
    never obeyed by the terminal."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(printable(text, keep="\n\t\r"))
        return len(text)

    def flush(self) -> None:
        self._stream.flush()

    def fileno(self) -> int:
        return self._stream.fileno()

    def isatty(self) -> bool:
        return self._stream.isatty()

    @property
    def encoding(self) -> str:
        return getattr(self._stream, "encoding", "utf-8")


@contextmanager
def _shown_streams() -> Iterator[None]:
    out, err = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = _Shown(out), _Shown(err)
    try:
        yield
    finally:
        sys.stdout, sys.stderr = out, err


def main(argv: list[str] | None = None) -> int:
    """Run the command ``argv`` (default: this process's arguments) and return its exit status."""
    argv = sys.argv[1:] if argv is None else argv
    try:
        with speaking(language_asked(argv)):  # --help is printed while parsing: in the language asked for
            args = build_parser().parse_args(argv)
        with speaking(args.lang), _shown_streams():
            return args.func(args)
    except BrokenPipeError:  # the reader went away (``| head``): nothing more to say, and no traceback
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except (UsageError, ValueError, TypeError) as error:  # a bad value, named by whoever refused it
        return report_mistake(str(error))
