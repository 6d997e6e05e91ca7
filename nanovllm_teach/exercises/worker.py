"""The sandboxed worker: the only process where a learner's file runs, and all it does is answer calls.

Role: grading, the far side of the sandbox's edge (``remote`` is the near side). Emits no events.

A script on the grading copy of the package (``isolation``), it imports only the standard library, ``msgspec``
and what the learner's code imports, and never holds the engine, a trace or the verdict: every answer is checked
outside before the engine uses it.
"""

from __future__ import annotations

import importlib.util
import os
import pkgutil
import select
import struct
import sys
import time
import traceback
from typing import Any

import msgspec

MAX_FRAME = 1 << 20  # a call's arguments or a result: a few hundred bytes; a megabyte is far more
_HEADER = struct.Struct(">I")


class FrameError(Exception):
    """The other side closed the channel, or sent a frame too large or not JSON."""


def wait_ready(fd: int, writing: bool, deadline: float | None) -> None:
    """Until ``fd`` can be written (``writing``) or read; TimeoutError at ``deadline`` (None: no deadline). A
    frame written under a deadline goes ``select.PIPE_BUF`` bytes at a time: a pipe that can be written takes
    that many without blocking, more could block past the deadline. (The track's frames wait the same way.)"""
    if deadline is None:
        return
    left = deadline - time.monotonic()
    waiting = ([], [fd]) if writing else ([fd], [])
    if left <= 0 or not any(select.select(*waiting, [], left)[:2]):
        raise TimeoutError


def write_frame(fd: int, message: Any, deadline: float | None = None) -> None:
    """One frame; TimeoutError if it has not gone whole by ``deadline`` (the parent's side: a worker that stopped
    reading, with a frame larger than the pipe holds)."""
    data = msgspec.json.encode(message)
    if len(data) > MAX_FRAME:
        raise FrameError(f"a frame of {len(data)} bytes is larger than {MAX_FRAME}")
    view = memoryview(_HEADER.pack(len(data)) + data)
    while view:
        wait_ready(fd, True, deadline)
        view = view[os.write(fd, view[:select.PIPE_BUF] if deadline is not None else view):]


def read_frame(fd: int, deadline: float | None = None) -> Any:
    """One frame; TimeoutError if it has not come whole by ``deadline`` (the parent's side: a call that hangs)."""
    def exactly(size: int) -> bytes:
        data = b""
        while len(data) < size:
            wait_ready(fd, False, deadline)
            chunk = os.read(fd, min(size - len(data), 1 << 16))
            if not chunk:
                raise FrameError("the channel closed")
            data += chunk
        return data

    (size,) = _HEADER.unpack(exactly(_HEADER.size))
    if size > MAX_FRAME:
        raise FrameError(f"a frame of {size} bytes is larger than {MAX_FRAME}")
    try:
        return msgspec.json.decode(exactly(size))
    except msgspec.DecodeError as error:
        raise FrameError(f"a frame that is not JSON: {error}") from None


class Failure(msgspec.Struct, omit_defaults=True):
    """What went wrong in the learner's ``function`` (None: in the engine): what it raised (``at``: file, line
    and code of their last line that ran), a result the engine cannot use (``refused``), or no answer (a
    ``timeout`` in seconds, or the process's end: an empty ``type``)."""

    function: str | None = None
    type: str = ""
    message: str = ""
    at: tuple[str, int, str] | None = None
    not_implemented: bool = False
    refused: bool = False
    timeout: float | None = None
    exitcode: int | None = None


def describe_error(error: BaseException, code_file: str | None) -> Failure:
    at = None
    frames = [f for f in traceback.extract_tb(error.__traceback__) if f.filename == code_file]
    if frames:
        at = (os.path.basename(frames[-1].filename), frames[-1].lineno or 0, (frames[-1].line or "")[:200])
    return Failure(type=type(error).__name__[:80], message=str(error)[:500], at=at,
                   not_implemented=isinstance(error, NotImplementedError))


def serve(solution: dict[str, Any], code_file: str | None, calls_fd: int, answers_fd: int) -> None:
    """Answer calls until the channel closes. An ``"adapter"`` (``snapshots``) rebuilds from the records the
    objects the function works on: the call is ``adapter(function, *args)``. ``code_file`` None: the line blamed
    is in the function's own file (a notebook's)."""
    while True:
        try:
            call = read_frame(calls_fd)
        except FrameError:
            return
        function = solution.get(call.get("function")) if isinstance(call, dict) else None
        where = code_file or getattr(getattr(function, "__code__", None), "co_filename", None)
        try:
            args = [msgspec.convert(arg, resolve_wire_type(kind)) for arg, kind in zip(call["args"], call["types"])]
            adapter = call.get("adapter")
            result = pkgutil.resolve_name(adapter)(function, *args) if adapter else function(*args)
            write_frame(answers_fd, {"result": msgspec.to_builtins(result)})
        except BaseException as error:  # everything the learner's code does is an answer, even SystemExit
            try:
                write_frame(answers_fd, {"error": describe_error(error, where)})
            except FrameError:
                return


_BUILTIN_TYPES = {"int": int, "float": float, "str": str, "bool": bool}


def is_int(value: Any) -> bool:
    """An int that is not a bool (what a block id, a count, a slot or a quiz's answer must be)."""
    return isinstance(value, int) and not isinstance(value, bool)


def resolve_wire_type(kind: str) -> Any:
    """The type a wire name stands for: a builtin's name, ``"list[T]"``, ``"T|None"``, or ``"module:qualname"``
    imported from the grading copy (an exercise's own records live in its folder, so the worker lists none)."""
    if kind.startswith("list[") and kind.endswith("]"):
        return list[resolve_wire_type(kind[len("list["):-1])]
    if kind.endswith("|None"):
        return resolve_wire_type(kind[:-len("|None")]) | None
    if kind in _BUILTIN_TYPES:
        return _BUILTIN_TYPES[kind]
    return pkgutil.resolve_name(kind)


def set_limits(address_space: int, cpu_s: int, file_size: int, processes: int, open_files: int) -> None:
    import resource

    for limit, value in ((resource.RLIMIT_AS, address_space), (resource.RLIMIT_CPU, cpu_s),
                         (resource.RLIMIT_FSIZE, file_size), (resource.RLIMIT_NPROC, processes),
                         (resource.RLIMIT_NOFILE, open_files)):
        resource.setrlimit(limit, (value, value))


def load(path: str, functions: list[str], answers_fd: int) -> dict[str, Any] | None:
    """Execute the learner's file and say whether it loaded; its names, or None."""
    try:
        spec = importlib.util.spec_from_file_location("solution", path)
        module = importlib.util.module_from_spec(spec)
        sys.modules["solution"] = module
        spec.loader.exec_module(module)
    except BaseException as error:  # a syntax error, a failing import, sys.exit() at the top level...
        write_frame(answers_fd, {"load_error": describe_error(error, path)})
        return None
    names = vars(module)
    missing = [name for name in functions if not callable(names.get(name))]
    write_frame(answers_fd, {"missing": missing} if missing else {"loaded": True})
    return None if missing else names


def main() -> None:
    """``worker.py ROOT SOLUTION FUNCTIONS LIMITS FDS TAG`` (TAG only marks the process)."""
    root, path, functions, limits, fds = sys.argv[1:6]
    calls_fd, answers_fd = (int(fd) for fd in fds.split(","))
    sys.path[0] = root  # the package as graded (``isolation.grading_root``), not this script's folder
    set_limits(*(int(v) for v in limits.split(",")))
    write_frame(answers_fd, {"ready": True})  # the interpreter's start is not the learner's time
    solution = load(path, [name for name in functions.split(",") if name], answers_fd)
    if solution is not None:
        serve(solution, path, calls_fd, answers_fd)
    sys.stdout.flush()
    os._exit(0)  # a thread the learner left running ends here, with the process


if __name__ == "__main__":
    main()
