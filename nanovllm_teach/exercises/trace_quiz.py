"""The trace-reading quiz: questions about a recorded run, answered from its trace alone.

The run is the ``late_arrivals`` workload (requests arriving over time into a KV cache too small for them
all), recorded by the reference engine; ``quiz_trace()`` hands it out. Every answer is a number read off
the per-step and per-request tables (``trace.steps``, ``trace.requests``) or the events themselves, and the
grader computes the right answers from the same trace, so they hold on any machine and for any model:
with ``ignore_eos`` the schedule depends only on the workload.

A wrong answer gets a hint that says where in the trace to look, and whether the answer is too high or too
low — never the answer itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from nanovllm_teach.exercises.grading import Exercise, GradeResult, Solution, reference_trace
from nanovllm_teach.exercises.workloads import LATE_ARRIVALS
from nanovllm_teach.trace.reader import Trace

QUIZ_WORKLOAD = LATE_ARRIVALS


@dataclass(frozen=True)
class Question:
    key: str  # the key of the answer in the student's dict
    text: str
    hint: str  # where to look, shown with a wrong or missing answer
    answer: Callable[[Trace], int]


def _first_preemption(trace: Trace) -> tuple[int, int]:
    """(step, seq_id) of the first PREEMPT event."""
    event = trace.events_named("PREEMPT")[0]
    return event.step, event.stats["seq_id"]


QUESTIONS: tuple[Question, ...] = (
    Question("num_steps", "How many engine steps did the run take?",
             "trace.steps has one row per completed step (one STEP_DONE event each)",
             lambda t: len(t.steps)),
    Question("num_decode_steps", "How many of those steps were decode steps?",
             "StepRow.phase is 'prefill' or 'decode'",
             lambda t: sum(row.phase == "decode" for row in t.steps)),
    Question("max_decode_batch", "What was the largest batch a decode step ran?",
             "StepRow.batch_size, over the rows whose phase is 'decode'",
             lambda t: max(row.batch_size for row in t.steps if row.phase == "decode")),
    Question("peak_used_blocks", "What is the largest number of KV blocks in use at the end of a step?",
             "StepRow.used_blocks (STEP_DONE.used_blocks)",
             lambda t: max(row.used_blocks for row in t.steps)),
    Question("first_preemption_step", "In which step was a sequence preempted for the first time?",
             "the first row of trace.steps whose `preempted` list is not empty (or the first PREEMPT event)",
             lambda t: _first_preemption(t)[0]),
    Question("first_preempted_seq", "Which seq_id was preempted first?",
             "the `preempted` list of that row, or PREEMPT.seq_id",
             lambda t: _first_preemption(t)[1]),
    Question("num_preemptions", "How many preemptions happened in all?",
             "sum RequestRow.num_preemptions over trace.requests, or count the PREEMPT events",
             lambda t: len(t.events_named("PREEMPT"))),
    Question("last_finish_step", "In which step did the last request finish?",
             "RequestRow.finish_step (or the last STATE_TRANSITION to FINISHED)",
             lambda t: max(req.finish_step for req in t.requests)),
)


def quiz_trace(model: str | Path | None = None) -> Trace:
    """The trace the quiz asks about (recorded on first use, then kept for the rest of the process)."""
    return reference_trace(QUIZ_WORKLOAD, model)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass(frozen=True)
class QuizExercise(Exercise):
    """Graded by comparing the student's answers with the ones computed from the quiz trace."""

    questions: tuple[Question, ...]

    def grade(self, solution: Solution, model: str | Path | None = None) -> GradeResult:
        """``solution["answer_quiz"]``: the answers dict itself, or a function of the trace returning it."""
        if "answer_quiz" not in solution:
            return GradeResult(self.name, False, f"FAIL {self.name}: your solution defines no answer_quiz: write a "
                                                 "function answer_quiz(trace) that returns your answers dict")
        trace = quiz_trace(model)
        given = solution["answer_quiz"]
        if callable(given):
            try:
                given = given(trace)
            except NotImplementedError as error:
                hint = f" (hint: {error})" if str(error) else ""
                return GradeResult(self.name, False,
                                   f"FAIL {self.name}: you have not implemented answer_quiz yet{hint}")
        if not isinstance(given, dict):
            return GradeResult(self.name, False, f"FAIL {self.name}: answer_quiz must be a dict of answers (or a "
                                                 f"function of the trace returning one), got {type(given).__name__}")
        known = {q.key for q in self.questions}
        unknown = [f"  {key}: there is no such question (the questions are: {', '.join(sorted(known))})"
                   for key in given if key not in known]
        wrong: list[str] = []
        for q in self.questions:
            answer, right = given.get(q.key), q.answer(trace)
            if answer is None:
                wrong.append(f"  {q.key}: no answer yet. {q.text} Hint: {q.hint}.")
            elif not _is_int(answer):
                wrong.append(f"  {q.key}: answer with an int, not {type(answer).__name__} {answer!r}.")
            elif answer != right:
                direction = "too high" if answer > right else "too low"
                wrong.append(f"  {q.key}: {answer} is {direction}. {q.text} Hint: {q.hint}.")
        if wrong or unknown:
            right_count = len(self.questions) - len(wrong)
            return GradeResult(self.name, False, f"FAIL {self.name}: {right_count} of {len(self.questions)} answers "
                                                 "are right\n" + "\n".join(wrong + unknown))
        return GradeResult(self.name, True, f"PASS {self.name}: all {len(self.questions)} answers are right")


TRACE_QUIZ = QuizExercise("trace_quiz", "Reading a trace: a quiz on a recorded run",
                          "no engine code: trace.steps, trace.requests and the events", ("answer_quiz",), QUESTIONS)
