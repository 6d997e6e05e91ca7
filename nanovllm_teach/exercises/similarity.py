"""How alike a class's submissions are, to the reference solution and to each other: advice for a teacher.

Role: grading (the teacher's side, beside the gradebook). Emits no events.

The reference solutions are installed with the package every student has, so a grade alone cannot tell an
answer written from one copied. ``copydetect`` (winnowed fingerprints of the token stream, names and strings
as placeholders, so renaming changes nothing) measures the share of code in common once the template is
taken out. An answer shorter than ``MIN_TOKENS`` gets no number: a short right answer looks like every other,
and a number would accuse honest students. A copy of the reference's text (a hard link to its file is one) is
flagged whatever its size. It judges nothing: a flag is a reason to read two files side by side.
"""

from __future__ import annotations

import io
import itertools
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from nanovllm_teach.exercises.base import visible
from nanovllm_teach.i18n import Text, say

if TYPE_CHECKING:
    from copydetect import CodeFingerprint

MIN_TOKENS = 60  # tokens left once the template is taken out: below, an answer looks like every right one
NOISE_TOKENS = 25  # copydetect's default: a match shorter than this many tokens is chance
ALIKE = 0.8  # a share of code in common at or above which a pair is flagged
VERBATIM = 0.9  # the share of the reference's own text (comments included) that makes a submission its copy

COPY_OF_REFERENCE = Text(en="the reference solution's text, copied ({share:.0%} of it word for word)",
                         zh="照抄了参考答案的原文（{share:.0%} 一字不差）")
LIKE_REFERENCE = Text(en="{share:.0%} of its code is the reference's, names aside", zh="{share:.0%} 的代码与参考答案相同（不计命名）")
LIKE_STUDENT = Text(en="{share:.0%} of its code in common with {student}'s", zh="{share:.0%} 的代码与 {student} 的相同")
TOO_SMALL = Text(en="too short to compare ({tokens} tokens, fewer than {least})",
                 zh="太短，无法比较（{tokens} 个 token，少于 {least}）")


@dataclass(frozen=True)
class Likeness:
    """One submission against the rest: its size once the template is taken out, its shares of code in common
    (0 to 1; None when it is too short to say) with the reference and the most alike other student."""

    tokens: int
    reference: float | None = None
    closest: str | None = None
    closest_share: float | None = None
    flags: tuple[str, ...] = ()

    @property
    def note(self) -> str:
        """What the gradebook says: the flags, else why there are no numbers, else nothing."""
        if self.flags:
            return "; ".join(self.flags)
        return say(TOO_SMALL, tokens=self.tokens, least=MIN_TOKENS) if self.tokens < MIN_TOKENS else ""


def _fingerprint(path: Path, text: str, template: list[int], tokens: bool) -> CodeFingerprint:
    """``text``'s fingerprints less ``template``'s: of its tokens (names and strings as placeholders), or of
    its characters as written (``tokens`` False: comments and docstrings count)."""
    from copydetect import CodeFingerprint  # numpy and pygments, only when a class is compared

    return CodeFingerprint(str(path), NOISE_TOKENS, 1, boilerplate=template, filter=tokens, language="python",
                           fp=io.StringIO(text))


def _shares(a: CodeFingerprint, b: CodeFingerprint) -> tuple[float, float]:
    """The share of ``a``'s code found in ``b`` and of ``b``'s found in ``a``."""
    from copydetect import compare_files

    if not a.token_coverage or not b.token_coverage:
        return 0.0, 0.0
    _, (share_a, share_b), _ = compare_files(a, b)
    return float(share_a), float(share_b)


def _read(path: Path | None) -> str | None:
    """A submission's text; None when there is none, or when it is gone since it was graded (the class goes on)."""
    try:
        return None if path is None else path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


def _closest(prints: dict[int, CodeFingerprint]) -> dict[int, tuple[float, int]]:
    """For each submission, the largest share of code it has in common with another, and which."""
    closest: dict[int, tuple[float, int]] = {}
    for a, b in itertools.combinations(prints, 2):
        share = max(_shares(prints[a], prints[b]))  # one copied into a longer file is still a copy
        for one, other in ((a, b), (b, a)):
            if share > closest.get(one, (-1.0, -1))[0]:
                closest[one] = (share, other)
    return closest


def likeness(students: list[str], paths: list[Path | None], reference: Path, template: Path,
             share_with_reference: bool = True) -> list[Likeness | None]:
    """Each submission's ``Likeness`` (None where there is no file to compare), in the order given; ``paths``
    have passed the class's checks (UTF-8 text of bounded size). ``share_with_reference`` False: a build track
    chapter, whose right answer resembles the engine by design (copies are still flagged)."""
    shared = template.read_text(encoding="utf-8")
    boilerplate = {kind: list(_fingerprint(template, shared, [], kind).hashes) for kind in (True, False)}

    def prints(path: Path, text: str, tokens: bool) -> CodeFingerprint:
        return _fingerprint(path, text, boilerplate[tokens], tokens)

    reference_text = reference.read_text(encoding="utf-8")
    ref_tokens, ref_raw = prints(reference, reference_text, True), prints(reference, reference_text, False)
    texts = {k: text for k, path in enumerate(paths) if (text := _read(path)) is not None}
    tokens = {k: prints(paths[k], text, True) for k, text in texts.items()}
    compared = [k for k in tokens if tokens[k].token_coverage >= MIN_TOKENS]
    closest = _closest({k: tokens[k] for k in compared})
    found: list[Likeness | None] = [None] * len(paths)
    for k, text in texts.items():
        flags = []
        copied = _shares(prints(paths[k], text, False), ref_raw)[1]
        if copied >= VERBATIM:
            flags.append(say(COPY_OF_REFERENCE, share=copied))
        size = int(tokens[k].token_coverage)
        if k not in compared:
            found[k] = Likeness(size, flags=tuple(flags))
            continue
        to_reference = max(_shares(tokens[k], ref_tokens)) if share_with_reference else None
        if to_reference is not None and to_reference >= ALIKE and copied < VERBATIM:
            flags.append(say(LIKE_REFERENCE, share=to_reference))
        share, other = closest.get(k, (None, None))
        if share is not None and share >= ALIKE:
            flags.append(say(LIKE_STUDENT, share=share, student=visible(students[other])))
        found[k] = Likeness(size, to_reference, None if other is None else students[other], share, tuple(flags))
    return found
