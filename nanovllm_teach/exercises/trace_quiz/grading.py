"""Grading the trace-reading quiz (exercise ``trace_quiz``): questions about a recorded run, answered from its trace alone.

The run is the ``late_arrivals`` workload (requests arriving over time into a KV cache too small for them
all), recorded by the reference engine; ``quiz_trace()`` hands it out. Every answer is a number read off
the per-step and per-request tables (``trace.steps``, ``trace.requests``) or the events themselves, and the
grader computes the right answers from the same trace, so they hold on any machine and for any model:
with ``ignore_eos`` the schedule depends only on the workload.

In a learner's self-check (``hints``) a wrong answer gets a hint that says where in the trace to look, and
whether the answer is too high or too low — never the answer itself. In a class the verdict says only how many
answers are right: hints there would let a blind binary search pass without reading the trace, and only
the first answer graded into a class's gradebook counts (``graded_once``: later ones are counted as
attempts, ``gradebook.carried_over``). Questions,
hints and verdicts are ``Text`` in both languages, said in the chosen one (``i18n.resolve_lang``); the verdict's ``PASS``/``FAIL trace_quiz:`` prefix stays in English.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from nanovllm_teach.exercises.base import (DEFAULT_TIME_LIMIT_S, Exercise, GradeResult, SolutionSource,
                                          borrowed_from_solutions, imports_reference_solutions, not_implemented,
                                          visible)
from nanovllm_teach.exercises.references import reference_trace
from nanovllm_teach.exercises.remote import RemoteFailure, Worker
from nanovllm_teach.exercises.trace_quiz.wire import ADAPTER, RECORD_TYPE, quiz_record
from nanovllm_teach.exercises.worker import is_int
from nanovllm_teach.i18n import Text, say
from nanovllm_teach.step_workloads import LATE_ARRIVALS
from nanovllm_teach.trace.reader import Trace

QUIZ_WORKLOAD = LATE_ARRIVALS


@dataclass(frozen=True)
class Question:
    key: str  # the key of the answer in the student's dict
    text: Text
    hint: Text  # where to look, shown with a wrong or missing answer
    answer: Callable[[Trace], int]


def _first_preemption(trace: Trace) -> tuple[int, int]:
    """(step, seq_id) of the first PREEMPT event."""
    event = trace.events_named("PREEMPT")[0]
    return event.step, event.stats["seq_id"]


QUESTIONS: tuple[Question, ...] = (
    Question("num_steps",
             Text(en="How many engine steps did the run take?",
                  zh="这次运行一共走了多少个引擎步？"),
             Text(en="trace.steps has one row per completed step (one STEP_DONE event each)",
                  zh="trace.steps 中每个完成的步占一行（每步对应一个 STEP_DONE 事件）"),
             lambda t: len(t.steps)),
    Question("num_decode_steps",
             Text(en="How many of those steps were decode steps?",
                  zh="其中有多少步是解码（decode）步？"),
             Text(en="StepRow.phase is 'prefill' or 'decode'",
                  zh="StepRow.phase 的值是 'prefill' 或 'decode'"),
             lambda t: sum(row.phase == "decode" for row in t.steps)),
    Question("max_decode_batch",
             Text(en="What was the largest batch a decode step ran?",
                  zh="解码（decode）步运行过的最大 batch 有多大？"),
             Text(en="StepRow.batch_size, over the rows whose phase is 'decode'",
                  zh="看 phase 为 'decode' 的那些行的 StepRow.batch_size"),
             lambda t: max(row.batch_size for row in t.steps if row.phase == "decode")),
    Question("peak_used_blocks",
             Text(en="What is the largest number of KV blocks in use at the end of a step?",
                  zh="在某一步结束时，正在使用的 KV 块最多有多少个？"),
             Text(en="StepRow.used_blocks (STEP_DONE.used_blocks)",
                  zh="StepRow.used_blocks（即 STEP_DONE.used_blocks）"),
             lambda t: max(row.used_blocks for row in t.steps)),
    Question("first_preemption_step",
             Text(en="In which step was a sequence preempted for the first time?",
                  zh="序列第一次被抢占（preempted）是在哪一步？"),
             Text(en="the first row of trace.steps whose `preempted` list is not empty (or the first PREEMPT event)",
                  zh="trace.steps 中第一个 `preempted` 列表不为空的行（或第一个 PREEMPT 事件）"),
             lambda t: _first_preemption(t)[0]),
    Question("first_preempted_seq",
             Text(en="Which seq_id was preempted first?",
                  zh="最先被抢占（preempted）的是哪个 seq_id？"),
             Text(en="the `preempted` list of that row, or PREEMPT.seq_id",
                  zh="那一行的 `preempted` 列表，或 PREEMPT.seq_id"),
             lambda t: _first_preemption(t)[1]),
    Question("num_preemptions",
             Text(en="How many preemptions happened in all?",
                  zh="一共发生了多少次抢占（preemption）？"),
             Text(en="sum RequestRow.num_preemptions over trace.requests, or count the PREEMPT events",
                  zh="把 trace.requests 中各行的 RequestRow.num_preemptions 加起来，或者数一数 PREEMPT 事件"),
             lambda t: len(t.events_named("PREEMPT"))),
    Question("last_finish_step",
             Text(en="In which step did the last request finish?",
                  zh="最后一个请求在哪一步完成？"),
             Text(en="RequestRow.finish_step (or the last STATE_TRANSITION to FINISHED)",
                  zh="RequestRow.finish_step（或最后一个转到 FINISHED 的 STATE_TRANSITION）"),
             lambda t: max(req.finish_step for req in t.requests)),
)

# What the grader says, in both languages (``say`` picks the chosen one).
NO_ANSWER_QUIZ = Text(
    en="your solution defines no answer_quiz: write a function answer_quiz(trace) that returns your answers dict",
    zh="你的解答没有定义 answer_quiz：请写一个函数 answer_quiz(trace)，返回你的答案 dict")
ANSWERING_TOO_LONG = Text(en="your answer_quiz did not return within {limit:g} s: the grader stopped it",
                          zh="你的 answer_quiz 在 {limit:g} 秒内没有返回：评分器已将它停止")
RAISED = Text(en="your answer_quiz raised {type}: {message}",
              zh="你的 answer_quiz 抛出了 {type}：{message}")
NO_ANSWERS = Text(en=("the grading process ended (exit code {code}) without your answers: does your code end the "
                      "process?"),
                  zh="评分进程结束了（退出码 {code}），却没有交回你的答案：你的代码是否结束了这个进程？")
NOT_A_DICT = Text(en="answer_quiz must be a dict of answers (or a function of the trace returning one), got {name}",
                  zh="answer_quiz 必须是由答案组成的 dict（或一个接收 trace、返回这样一个 dict 的函数），"
                     "而你给出的是 {name}")
NO_SUCH_QUESTION = Text(en="  {key}: there is no such question (the questions are: {keys})",
                        zh="  {key}：没有这道题（题目的键是：{keys}）")
KEY_SEPARATOR = Text(en=", ", zh="、")
NO_ANSWER_YET = Text(en="  {key}: no answer yet. {question} Hint: {hint}.",
                     zh="  {key}：还没有作答。{question}提示：{hint}。")
NOT_AN_INT = Text(en="  {key}: answer with an int, not {type} {text}.",
                  zh="  {key}：请用 int 作答，而不是 {type} {text}。")
WRONG = Text(en="  {key}: {answer} is {direction}. {question} Hint: {hint}.",
             zh="  {key}：{answer} {direction}。{question}提示：{hint}。")
TOO_HIGH = Text(en="too high", zh="偏大")
TOO_LOW = Text(en="too low", zh="偏小")
SOME_RIGHT = Text(en="{right} of {total} answers are right",
                  zh="{total} 个答案中有 {right} 个正确")
ALL_RIGHT = Text(en="all {total} answers are right",
                 zh="{total} 个答案全部正确")


def quiz_trace(model: str | Path | None = None) -> Trace:
    """The trace the quiz asks about (recorded on first use, then kept for the rest of the process)."""
    return reference_trace(QUIZ_WORKLOAD, model)


@dataclass(frozen=True)
class QuizExercise(Exercise):
    """Graded by comparing the student's answers with the ones computed from the quiz trace."""

    questions: tuple[Question, ...]
    graded_once = True  # a class's second answer could be a search on the first one's count

    def grade(self, solution: SolutionSource, model: str | Path | None = None,
              time_limit: float = DEFAULT_TIME_LIMIT_S, isolate: bool | None = None,
              hints: bool = True) -> GradeResult:
        """``solution["answer_quiz"]``: the answers dict itself, or a function of the trace returning it,
        which runs in the sandboxed worker (``remote``) like every learner's function: the trace goes
        there as data (``wire``), the answers come back as data. ``isolate`` as for
        ``EngineExercise.grade``; ``hints``: say which answers are wrong and how (a self-check), or only how
        many are right (a class)."""
        trace = quiz_trace(model)
        if isinstance(solution, dict):
            if "answer_quiz" not in solution:
                return self.fail(say(NO_ANSWER_QUIZ))
            problem = borrowed_from_solutions(solution)
            if problem is None and not callable(solution["answer_quiz"]):
                return self._mark(solution["answer_quiz"], trace, hints)
        else:
            problem = imports_reference_solutions(Path(solution))
        if problem is not None:
            return self.fail(problem)
        source = Path(solution) if not isinstance(solution, dict) else solution
        # No function is required to load: a file may hold the answers dict itself.
        with Worker(source, (), (), time_limit, isolate) as worker:
            result = self._answered(worker, trace, time_limit, hints)
            result.output = worker.close()
            result.isolated = worker.isolated
        return result

    def _answered(self, worker: Worker, trace: Trace, time_limit: float, hints: bool) -> GradeResult:
        problem = worker.load()  # no function is required: none is missing
        if problem is not None:
            return self.fail(problem)
        try:
            answered = worker.call("answer_quiz", (quiz_record(trace),), (RECORD_TYPE,), adapter=ADAPTER)
        except RemoteFailure as failure:
            raised = failure.failure
            if raised.timeout is not None:
                return self.fail(say(ANSWERING_TOO_LONG, limit=time_limit))
            if not raised.type:  # nothing raised: the worker ended
                return self.fail(say(NO_ANSWERS, code=raised.exitcode))
            if raised.not_implemented:
                return not_implemented(self, "answer_quiz")
            return self.fail(say(RAISED, type=raised.type, message=raised.message))
        if not isinstance(answered, dict) or answered.get("absent") is True:
            return self.fail(say(NO_ANSWER_QUIZ))
        if "not_a_dict" in answered:
            return self._mark(_Described(visible(str(answered["not_a_dict"]))), trace, hints)
        answers = answered.get("answers")
        if not isinstance(answers, dict):
            return self.fail(say(NO_ANSWERS, code=None))
        given = {visible(key): value if is_int(value) else _Described(visible(str(value.get("not_int", ""))),
                                                                      visible(str(value.get("repr", ""))))
                 for key, value in answers.items() if is_int(value) or isinstance(value, dict)}
        return self._mark(given, trace, hints)

    def _mark(self, given: Any, trace: Trace, hints: bool = True) -> GradeResult:
        if not isinstance(given, dict):
            name = given.type_name if isinstance(given, _Described) else type(given).__name__
            return self.fail(say(NOT_A_DICT, name=name))
        known = {q.key for q in self.questions}
        keys = say(KEY_SEPARATOR).join(sorted(known))
        unknown = [say(NO_SUCH_QUESTION, key=key, keys=keys) for key in given if key not in known]
        wrong: list[str] = []
        for q in self.questions:
            answer, right = given.get(q.key), q.answer(trace)
            if answer is None:
                wrong.append(say(NO_ANSWER_YET, key=q.key, question=say(q.text), hint=say(q.hint)))
            elif not is_int(answer):
                shown = answer if isinstance(answer, _Described) else _Described(type(answer).__name__, repr(answer))
                wrong.append(say(NOT_AN_INT, key=q.key, type=shown.type_name, text=shown.text))
            elif answer != right:
                direction = say(TOO_HIGH if answer > right else TOO_LOW)
                wrong.append(say(WRONG, key=q.key, answer=answer, direction=direction, question=say(q.text),
                                 hint=say(q.hint)))
        if wrong or unknown:
            right_count = len(self.questions) - len(wrong)
            summary = say(SOME_RIGHT, right=right_count, total=len(self.questions))
            return self.fail(summary + "\n" + "\n".join(wrong + unknown) if hints else summary)
        # The PASS prefix stays in English in every language: graders parse it.
        return GradeResult(self.name, True, f"PASS {self.name}: " + say(ALL_RIGHT, total=len(self.questions)))


@dataclass(frozen=True)
class _Described:
    """A non-int answer from the child, by its type's name and its (shortened) repr."""

    type_name: str
    text: str = ""
