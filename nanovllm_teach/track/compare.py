"""How ``build check`` compares a learner's result with the reference's, and what it says when they differ.

Role: teaching (the track). Emits no events.

Numbers: element by element, ``|yours - reference| <= atol + rtol * |reference|`` (``torch.isclose``'s rule);
the sentence names the first element that breaks it (in row-major order), its position and both values, and
how many elements differ in all. Draws: a chi-square goodness-of-fit test of the tokens drawn against the
probabilities they should follow, with the p-value from the chi-square distribution's tail (the regularised
upper incomplete gamma function, ``torch.special.gammaincc``); a correct sampler fails it with probability
``FALSE_FAILURE``.
"""

from __future__ import annotations

from typing import Any, Callable

import torch

from nanovllm_teach.i18n import Text, say

FALSE_FAILURE = 1e-4  # chance that a correct sampler fails one chi-square test, over the choice of seeds

NOT_A_TENSOR = Text(en="your {name} on {case} returned {type}, not a tensor", zh="你的 {name} 在{case}上返回了 {type}，不是张量")
WRONG_SHAPE = Text(en="your {name} on {case} returned shape {got}; the reference returns {want}",
                   zh="你的 {name} 在{case}上返回的形状是 {got}；参考实现返回 {want}")
WRONG_DTYPE = Text(en="your {name} on {case} returned dtype {got}; the reference returns {want}",
                   zh="你的 {name} 在{case}上返回的 dtype 是 {got}；参考实现返回 {want}")
WRONG_ELEMENT = Text(
    en="your {name} on {case}: element {index} is {got}, the reference gives {want} (allowed: |difference| <= "
       "{atol:g} + {rtol:g} * |reference|); {count} of {total} elements differ",
    zh="你的 {name} 在{case}上：元素 {index} 是 {got}，参考实现给出 {want}（允许 |差| <= {atol:g} + {rtol:g} * "
       "|参考值|）；共 {total} 个元素中有 {count} 个不同")
WRONG_COUNT = Text(en="your {name} on {case} returned {got} values; the reference returns {want}",
                   zh="你的 {name} 在{case}上返回了 {got} 个值；参考实现返回 {want} 个")
OUTPUT = Text(en="{name} (output {index})", zh="{name}（第 {index} 个输出）")
NOT_RANDOM_ENOUGH = Text(
    en="your {name} on {case}: the tokens of {draws} seeded draws do not follow softmax(logits / temperature): "
       "chi-square {stat:.1f} with {df} degrees of freedom, p = {p:.1e} (a correct sampler fails this test with "
       "probability {alpha:g}); token {token} was drawn {observed} times, {expected:.0f} expected",
    zh="你的 {name} 在{case}上：{draws} 次带 seed 的抽样得到的 token 不服从 softmax(logits / temperature)：卡方值 "
       "{stat:.1f}，自由度 {df}，p = {p:.1e}（正确的采样器未通过这个检验的概率是 {alpha:g}）；token {token} 被抽到 "
       "{observed} 次，期望 {expected:.0f} 次")
RAISED = Text(en="your {name} raised {type} on {case}: {message}", zh="你的 {name} 在{case}上抛出了 {type}：{message}")
DREW_FILTERED = Text(en="your {name} on {case} drew token {token} {count} times, but its logit is -inf (filtered out)",
                     zh="你的 {name} 在{case}上抽到了 token {token} 共 {count} 次，但它的 logit 是 -inf（已被过滤掉）")


def _value(x: torch.Tensor) -> str:
    return str(x.item()) if x.dtype == torch.bool else f"{x.item():.6g}"


def first_difference(name: str, case: str, got: Any, want: torch.Tensor, rtol: float, atol: float) -> str | None:
    """What is wrong with ``got`` against the reference's ``want`` (None: nothing): its type, shape or dtype,
    else the first element outside the tolerance. Booleans and integers must be equal."""
    if not isinstance(got, torch.Tensor):
        return say(NOT_A_TENSOR, name=name, case=case, type=type(got).__name__)
    if got.shape != want.shape:
        return say(WRONG_SHAPE, name=name, case=case, got=tuple(got.shape), want=tuple(want.shape))
    if got.dtype != want.dtype:
        return say(WRONG_DTYPE, name=name, case=case, got=got.dtype, want=want.dtype)
    if want.dtype == torch.bool or not want.is_floating_point():
        rtol = atol = 0.0
        bad = got != want
    else:
        bad = ~torch.isclose(got.float(), want.float(), rtol=rtol, atol=atol, equal_nan=True)
    if not bool(bad.any()):
        return None
    index = tuple(int(i) for i in bad.nonzero()[0])
    return say(WRONG_ELEMENT, name=name, case=case, index=list(index), got=_value(got[index]),
               want=_value(want[index]), atol=atol, rtol=rtol, count=int(bad.sum()), total=bad.numel())


def outputs_difference(name: str, case: str, got: Any, want: Any, rtol: float, atol: float) -> str | None:
    """``first_difference`` for a result that is a tensor or a tuple of tensors (each output named)."""
    if isinstance(want, torch.Tensor):
        return first_difference(name, case, got, want, rtol, atol)
    if not isinstance(got, (tuple, list)) or len(got) != len(want):
        return say(WRONG_COUNT, name=name, case=case, got=len(got) if isinstance(got, (tuple, list)) else 1,
                   want=len(want))
    for index, (one, reference) in enumerate(zip(got, want)):
        problem = first_difference(say(OUTPUT, name=name, index=index), case, one, reference, rtol, atol)
        if problem:
            return problem
    return None


def chi_square_difference(name: str, case: str, tokens: torch.Tensor, probs: torch.Tensor) -> str | None:
    """Whether ``tokens`` (draws) follow ``probs`` (one row over the vocabulary): a token of probability 0
    drawn at all fails; otherwise Pearson's chi-square over the tokens of positive probability fails when its
    p-value is below ``FALSE_FAILURE`` (the test wants every expected count large: the cases give each kept
    token at least a few dozen)."""
    counts = torch.bincount(tokens, minlength=probs.numel()).double()
    impossible = (probs == 0) & (counts > 0)
    if bool(impossible.any()):
        token = int(impossible.nonzero()[0])
        return say(DREW_FILTERED, name=name, case=case, token=token, count=int(counts[token]))
    kept = probs > 0
    expected = probs[kept].double() * tokens.numel()
    observed = counts[kept]
    stat = float(((observed - expected) ** 2 / expected).sum())
    df = int(kept.sum()) - 1
    p = float(torch.special.gammaincc(torch.tensor(df / 2, dtype=torch.float64), torch.tensor(stat / 2)))
    if p >= FALSE_FAILURE:
        return None
    worst = int(((observed - expected) ** 2 / expected).argmax())
    token = int(kept.nonzero()[worst])
    return say(NOT_RANDOM_ENOUGH, name=name, case=case, draws=tokens.numel(), stat=stat, df=df, p=p,
               alpha=FALSE_FAILURE, token=token, observed=int(observed[worst]), expected=float(expected[worst]))


class Refused(Exception):
    """A learner's function raised: the sentence is the message."""


def called(name: str, case: str, fn: Callable[..., Any], args: tuple[Any, ...]) -> Any:
    """``fn(*args)``, the learner's function; what it raises becomes a ``Refused`` naming it and the case."""
    try:
        return fn(*args)
    except Exception as error:  # the learner's code: whatever it raises is what they need to see
        raise Refused(say(RAISED, name=name, case=case, type=type(error).__name__, message=str(error)[:300])) from None
