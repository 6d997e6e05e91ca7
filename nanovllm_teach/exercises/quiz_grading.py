"""Grading the trace-reading quiz (exercise ``trace_quiz``): questions about a recorded run, answered from its trace alone.

The run is the ``late_arrivals`` workload (requests arriving over time into a KV cache too small for them
all), recorded by the reference engine; ``quiz_trace()`` hands it out. Every answer is a number read off
the per-step and per-request tables (``trace.steps``, ``trace.requests``) or the events themselves, and the
grader computes the right answers from the same trace, so they hold on any machine and for any model:
with ``ignore_eos`` the schedule depends only on the workload.

A wrong answer gets a hint that says where in the trace to look, and whether the answer is too high or too
low — never the answer itself.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from nanovllm_teach.exercises.base import DEFAULT_TIME_LIMIT_S, Exercise, GradeResult, SolutionSource, not_implemented
from nanovllm_teach.exercises.engine_grading import obtain_solution
from nanovllm_teach.exercises.pieces import Watch
from nanovllm_teach.exercises.references import reference_trace
from nanovllm_teach.exercises.sandbox import LOADING, read_outcome, run_in_child, write_outcome
from nanovllm_teach.exercises.solution_files import borrowed_from_solutions, imports_reference_solutions
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


def _plain_answer(value: Any) -> Any:
    """An answer as the parent may read it: an int stays, anything else is described, never unpickled."""
    return value if _is_int(value) else {"not_int": type(value).__name__, "repr": repr(value)[:60]}


def _answer_in_child(watch: Watch, exercise: Exercise, source: SolutionSource, trace: Trace,
                     outcome_path: Path) -> None:
    """The child: load the file, call answer_quiz(trace) if it is a function, write the answers."""
    outcome: dict[str, Any] = {}
    solution = obtain_solution(exercise, source, watch, outcome)
    if solution is not None:
        given = solution["answer_quiz"]
        if callable(given):
            previous = watch.enter("answer_quiz")
            try:
                given = given(trace)
            except BaseException as error:  # NotImplementedError, SystemExit...: the verdict says which
                outcome["raised"] = {"type": type(error).__name__, "message": str(error),
                                     "not_implemented": isinstance(error, NotImplementedError)}
            finally:
                watch.leave(previous)
        if "raised" not in outcome:
            outcome["answers"] = ({str(k): _plain_answer(v) for k, v in given.items()} if isinstance(given, dict)
                                  else {"not_a_dict": type(given).__name__})
    write_outcome(outcome_path, outcome)


@dataclass(frozen=True)
class QuizExercise(Exercise):
    """Graded by comparing the student's answers with the ones computed from the quiz trace."""

    questions: tuple[Question, ...]

    def grade(self, solution: SolutionSource, model: str | Path | None = None,
              time_limit: float = DEFAULT_TIME_LIMIT_S) -> GradeResult:
        """``solution["answer_quiz"]``: the answers dict itself, or a function of the trace returning it
        (which runs in the grading child, like every student function)."""
        trace = quiz_trace(model)
        if isinstance(solution, dict):
            if "answer_quiz" not in solution:
                return self.fail("your solution defines no answer_quiz: write a function answer_quiz(trace) "
                                 "that returns your answers dict")
            problem = borrowed_from_solutions(solution)
            if problem is None and not callable(solution["answer_quiz"]):
                return self._mark(solution["answer_quiz"], trace)
        else:
            problem = imports_reference_solutions(Path(solution))
        if problem is not None:
            return self.fail(problem)
        with tempfile.TemporaryDirectory(prefix="nanovllm_teach_grade_") as tmp:
            path = Path(tmp) / "outcome.json"
            end = run_in_child(_answer_in_child, self, solution, trace, path, time_limit=time_limit)
            outcome = read_outcome(path)
        if end.exitcode is None:
            what = "your file did not finish loading" if end.running == LOADING else "your answer_quiz did not return"
            return self.fail(f"{what} within {end.limit:g} s: the grader stopped it")
        if "unusable" in outcome:
            return self.fail(outcome["unusable"])
        if "raised" in outcome:
            raised = outcome["raised"]
            if raised["not_implemented"]:
                return not_implemented(self, "answer_quiz")
            return self.fail(f"your answer_quiz raised {raised['type']}: {raised['message']}")
        if "answers" not in outcome:
            return self.fail(f"the grading process ended (exit code {end.exitcode}) without your answers: "
                             f"does your code end the process?")
        answers = outcome["answers"]
        if "not_a_dict" in answers:
            return self._mark(_Described(answers["not_a_dict"]), trace)
        return self._mark({k: (v if _is_int(v) else _Described(v["not_int"], v["repr"])) for k, v in answers.items()},
                          trace)

    def _mark(self, given: Any, trace: Trace) -> GradeResult:
        if not isinstance(given, dict):
            name = given.type_name if isinstance(given, _Described) else type(given).__name__
            return self.fail(f"answer_quiz must be a dict of answers (or a function of the trace returning "
                             f"one), got {name}")
        known = {q.key for q in self.questions}
        unknown = [f"  {key}: there is no such question (the questions are: {', '.join(sorted(known))})"
                   for key in given if key not in known]
        wrong: list[str] = []
        for q in self.questions:
            answer, right = given.get(q.key), q.answer(trace)
            if answer is None:
                wrong.append(f"  {q.key}: no answer yet. {q.text} Hint: {q.hint}.")
            elif not _is_int(answer):
                shown = answer if isinstance(answer, _Described) else _Described(type(answer).__name__, repr(answer))
                wrong.append(f"  {q.key}: answer with an int, not {shown.type_name} {shown.text}.")
            elif answer != right:
                direction = "too high" if answer > right else "too low"
                wrong.append(f"  {q.key}: {answer} is {direction}. {q.text} Hint: {q.hint}.")
        if wrong or unknown:
            right_count = len(self.questions) - len(wrong)
            return self.fail(f"{right_count} of {len(self.questions)} answers are right\n" + "\n".join(wrong + unknown))
        return GradeResult(self.name, True, f"PASS {self.name}: all {len(self.questions)} answers are right")


@dataclass(frozen=True)
class _Described:
    """A non-int answer from the child, by its type's name and its (shortened) repr."""

    type_name: str
    text: str = ""
