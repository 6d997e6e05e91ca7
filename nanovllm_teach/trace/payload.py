"""The building blocks of the event contract (``events.py``): the ``Payload`` base every event's record
derives from (with the attributes in which each event's type says what the event means, and their
defaults), ``Field`` (a type with its meaning, unit and volatility), the constrained number types,
``ContractError``, and ``show`` (how a stat's value reads in a sentence).

Part of the torch-free trace layer (msgspec and ``i18n`` only).
"""

import re
import sys
from typing import Annotated, Any, ClassVar, Iterator, Literal, get_type_hints

import msgspec
from msgspec import UNSET

from nanovllm_teach.i18n import Text, say

# Constrained number types: a count is never negative, a float never infinite or NaN (JSON's 1e400).
Count = Annotated[int, msgspec.Meta(ge=0)]
Finite = Annotated[float, msgspec.Meta(ge=-sys.float_info.max, le=sys.float_info.max)]
Ids = list[Count]
Duration = Annotated[float, msgspec.Meta(ge=0, le=sys.float_info.max)]  # a finite time span, never negative


# The classes whose work the events report, and the layer each belongs to: orchestration drives the step,
# resources decide who runs and which blocks they hold (pure Python), execution runs the model.
Actor = Literal["LLMEngine", "Scheduler", "BlockManager", "ModelRunner"]
LAYERS: dict[str, Literal["orchestration", "resources", "execution"]] = {
    "LLMEngine": "orchestration", "Scheduler": "resources", "BlockManager": "resources", "ModelRunner": "execution",
}


def Field(type_: Any, meaning: str, *, unit: str = "", volatile: bool = False) -> Any:
    """A payload field's type annotated with what it means (``unit``: e.g. "ms", "bytes", "tokens")."""
    return Annotated[type_, msgspec.Meta(description=meaning, extra={"unit": unit, "volatile": volatile})]


class Payload(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """The ``stats`` of one event. Reads and edits like a dict too (``stats["seq_id"]``, ``.get``,
    ``.items()``, ``stats["seq_id"] = 3``), so code written against the untyped payloads keeps working;
    absent (UNSET) fields are not keys, and a dict key that is not a field is a KeyError."""

    event: ClassVar[str] = ""  # each payload type's event name (set in events.py, with PAYLOADS)

    # What the event means. Each event's class (events_*.py) declares what differs from these defaults;
    # every reader of a trace (the state interpreter, diff, the console, the recorder) asks the class, so
    # no list of event names says it a second time.
    changes_state: ClassVar[bool] = False  # the state interpreter (state.py) applies it to the engine state
    decision: ClassVar[bool] = False  # a decision of the scheduler or the block manager (diff_decisions)
    acts_on_sequence: ClassVar[bool] = False  # done to one sequence or its blocks: diff says who did it
    carries_tensors: ClassVar[bool] = False  # has tensor fields (``x_shape`` always, ``x`` on budget)
    shown_from: ClassVar[Literal["quiet", "normal", "detail"]] = "normal"  # the least console verbosity showing it
    told_by: ClassVar[frozenset[str]] = frozenset()  # the stats keys ``did`` shows: a difference there reads as it
    # Whose work the event reports (``LAYERS`` gives its layer). The resources layer returns its decisions as
    # records and orchestration writes their events, so a scheduling event is the Scheduler's though
    # ``LLMEngine`` emits it.
    actor: ClassVar["Actor"] = "LLMEngine"

    # What the engine did in the event, as a verb phrase in both languages: a template of the payload's
    # fields (lists written as ``show`` writes them), ``event`` and ``reason``. Each event's class (events_*.py)
    # says its own; this one is for an event that does not.
    done: ClassVar[Text] = Text(en="recorded {event} ({reason})", zh="记录了 {event}（{reason}）")

    def did(self, reason: str, lang: str | None = None) -> str:
        """What the engine did in this event, as a verb phrase in ``lang`` (None: the chosen language,
        ``i18n``): "preempted seq 4" / "抢占了序列 4". diff's sentences are made of it. ``reason`` is the
        event's reason key."""
        values = {attr: show(value) if isinstance(value, list) else value
                  for attr in self.__struct_fields__ if (value := getattr(self, attr)) is not UNSET}
        return say(self.done, lang, event=self.event, reason=reason, **values)

    def _names(self) -> Iterator[tuple[str, str]]:
        return zip(self.__struct_fields__, self.__struct_encode_fields__)

    def __getitem__(self, key: str) -> Any:
        value = getattr(self, _ATTR.get(key, key), UNSET) if key in self.__struct_encode_fields__ else UNSET
        if value is UNSET:
            raise KeyError(key)
        return value

    def __setitem__(self, key: str, value: Any) -> None:
        if key not in self.__struct_encode_fields__:
            raise KeyError(say(NO_SUCH_FIELD, event=self.event, key=key))
        setattr(self, _ATTR.get(key, key), value)

    def __delitem__(self, key: str) -> None:
        """Make an optional field absent (as a recorder whose detail budget ran out leaves a tensor)."""
        self[key]  # KeyError if it is not there
        self[key] = UNSET

    def update(self, other: Any = (), /, **values: Any) -> None:
        for key, value in dict(other, **values).items():
            self[key] = value

    def get(self, key: str, default: Any = None) -> Any:
        try:
            return self[key]
        except KeyError:
            return default

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self.get(key, UNSET) is not UNSET

    def keys(self) -> list[str]:
        return [name for attr, name in self._names() if getattr(self, attr) is not UNSET]

    def __iter__(self) -> Iterator[str]:
        return iter(self.keys())

    def __len__(self) -> int:
        return len(self.keys())

    def items(self) -> list[tuple[str, Any]]:
        return [(name, getattr(self, attr)) for attr, name in self._names() if getattr(self, attr) is not UNSET]

    def to_dict(self) -> dict[str, Any]:
        return dict(self.items())


# Lists longer than this show their first items and their length in ``show``.
MAX_SHOWN = 12


def show(value: Any) -> str:
    """A stat's value as a sentence writes it: strings quoted, long lists cut to their first items."""
    if isinstance(value, list) and len(value) > MAX_SHOWN:
        return "[" + ", ".join(map(show, value[:MAX_SHOWN])) + f", … ({len(value)} in all)]"
    if isinstance(value, list):
        return "[" + ", ".join(map(show, value)) + "]"
    return repr(value) if isinstance(value, str) else str(value)


# Characters that would act on a terminal rather than show: C0 and C1 controls (ESC starts colour, title and
# cursor sequences), DEL, and the bidirectional overrides that make text read in another order than it is.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def printable(text: str, keep: str = "") -> str:
    """``text`` with every control character written as its escape (``\\x1b``), except those in ``keep``
    (the CLI keeps its own newlines, tabs and progress bars' carriage returns): a string from a trace is shown,
    never obeyed."""
    return _CONTROL.sub(lambda m: m.group() if m.group() in keep else m.group().encode("unicode_escape").decode("ascii"),
                        text)


# Field names that are Python keywords: the attribute gets a trailing underscore, the file keeps the name.
_ATTR = {"from": "from_"}
NO_SUCH_FIELD = Text(en="{event} has no field {key!r}", zh="{event} 没有字段 {key!r}")

class ContractError(ValueError):
    """An event that breaks this contract. ``event`` and ``field`` (None: the whole event) say where."""

    def __init__(self, event: str, field: str | None, problem: str) -> None:
        self.event, self.field, self.problem = event, field, problem
        where = f"{event}.{field}" if field else event
        super().__init__(f"{where}: {problem}")


_AT = re.compile(r"^(?P<problem>.*?)(?: - at `\$(?P<path>[^`]*)`)?$", re.S)
_MISSING = re.compile(r"(?:missing required|unknown) field `(?P<name>[^`]+)`")


def explain_error(event: str, error: msgspec.ValidationError) -> ContractError:
    """``error`` (msgspec's, at a JSON path such as ``$.seq_ids[2]``) as a ContractError naming the field."""
    match = _AT.match(str(error))
    problem, path = match["problem"], match["path"] or ""
    missing = _MISSING.search(problem)
    if missing:
        path = f"{path}.{missing['name']}"
    return ContractError(event, path.lstrip(".") or None, problem[0].lower() + problem[1:])


def field_meta(cls: type[Payload]) -> list[tuple[str, Any, msgspec.Meta | None, bool]]:
    """Each field of ``cls``: (name in the file, its full annotated type, its ``Field`` Meta (description,
    unit, volatility), whether it may be absent)."""
    out = []
    for attr, name, default in zip(cls.__struct_fields__, cls.__struct_encode_fields__,
                                   (msgspec.NODEFAULT,) * (len(cls.__struct_fields__) - len(cls.__struct_defaults__))
                                   + cls.__struct_defaults__):
        hint = get_type_hints(cls, include_extras=True)[attr]
        metas = [m for m in getattr(hint, "__metadata__", ()) if isinstance(m, msgspec.Meta) and m.description]
        out.append((name, hint, metas[-1] if metas else None,
                    default is not msgspec.NODEFAULT))
    return out


