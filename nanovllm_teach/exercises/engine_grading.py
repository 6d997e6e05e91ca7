"""Grading an engine exercise: the student's functions in the real engine, their trace against the reference.

Role: grading. Emits no events (the engine it runs emits its own).

In order: the solution is screened without running it (``base``); the reference traces start recording
(``references``); the sandboxed worker loads the student's file; a forked grading child runs every workload
with proxies in place of the student's functions (``pieces``), writing one trace per workload and an outcome
record; the parent judges them in order (``verdict``). PASS needs every workload to match and the child to
have ended normally.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from nanovllm_teach.exercises.base import (DEFAULT_TIME_LIMIT_S, Exercise, GradeResult, SolutionSource,
                                          borrowed_from_solutions, imports_reference_solutions, missing_functions,
                                          missing_sentence)
from nanovllm_teach.exercises.pieces import Piece, Watch, defined_at, describe_failure, installed
from nanovllm_teach.exercises.references import PendingReferences
from nanovllm_teach.exercises.remote import ChildEnd, Outcome, Worker, read_outcome, run_in_child, write_outcome
from nanovllm_teach.exercises.verdict import judge, load_run
from nanovllm_teach.exercises.worker import Failure
from nanovllm_teach.exercises.workloads import MAX_STEPS, GradedWorkload, record_graded, warm_up
from nanovllm_teach.i18n import Text, say
from nanovllm_teach.trace.diff import DECISION_EVENTS, Divergence
from nanovllm_teach.trace.reader import Trace

OUTCOME = "outcome.json"

NOT_LOADED = Text(en="your file could not be loaded: {type}: {message}", zh="你的文件无法加载：{type}：{message}")
LOADING_TOO_LONG = Text(en="your file did not finish loading within {limit:g} s (does it run something forever at "
                           "the top level?): the grader stopped it",
                        zh="你的文件在 {limit:g} 秒内没有加载完（它是否在顶层运行着永不结束的代码？）：评分器已将它停止")
ENDED_WHILE_LOADING = Text(en="your file ended the grading process while it was loading (exit code {code}): does "
                              "it call os._exit?",
                           zh="你的文件在加载时结束了评分进程（退出码 {code}）：它是否调用了 os._exit？")
ENDED_AFTER_THE_RUNS = Text(en="the grading process ended (exit code {code}) after all the runs matched, before it "
                               "finished: does your code end the process?",
                            zh="所有运行都与参考实现一致之后，评分进程没能正常收尾就结束了（退出码 {code}）：你的代码"
                               "是否结束了这个进程？")
ALL_MATCH = Text(en="with your {functions} the engine decides as the reference does on all {count} workloads "
                    "({decisions} decisions)",
                 zh="换上你的 {functions} 后，引擎在全部 {count} 个工作负载上的决策都与参考实现一致（共 {decisions} 个决策）")
AND = Text(en=" and ", zh=" 和 ")


def run_failure(end: ChildEnd, outcome: Outcome, workload: str) -> Failure | None:
    """How the child's run of ``workload`` failed (None: it did not); not in the outcome: the child was stopped
    or ended during it."""
    return outcome.runs[workload] if workload in outcome.runs else end.failure()


def exercise_points(pieces: tuple[Piece, ...]) -> tuple[str, ...]:
    """What raises in the worker's copy of the package: the exercise points, where each is defined, and the
    engine's other functions computing the same answer."""
    return tuple(sorted({p.point for p in pieces} | {defined_at(p.point) for p in pieces}
                        | {point for p in pieces for point in p.same_answer}))


def not_loaded(exercise: Exercise, loaded: dict[str, Any]) -> GradeResult | None:
    """The verdict on a file the worker could not load (None: it loaded, every function is there)."""
    if "load_error" in loaded:
        error = loaded["load_error"]  # made visible by the worker's proxy (``remote.described``)
        return exercise.fail(say(NOT_LOADED, type=error.type, message=error.message))
    if "missing" in loaded:
        missing = [name for name in exercise.functions if name in loaded["missing"]] or list(exercise.functions)
        return exercise.fail(missing_sentence(missing))
    if "timeout" in loaded:
        return exercise.fail(say(LOADING_TOO_LONG, limit=loaded["timeout"]))
    if loaded.get("loaded") is not True:
        return exercise.fail(say(ENDED_WHILE_LOADING, code=loaded.get("ended")))
    return None


def screened(solution: SolutionSource, functions: tuple[str, ...]) -> str | None:
    """Why ``solution`` is refused before anything of it runs (None: it is not)."""
    if isinstance(solution, dict):
        return missing_functions(solution, functions) or borrowed_from_solutions(solution)
    return imports_reference_solutions(Path(solution))


def graded_in_worker(exercise: Any, solution: SolutionSource, time_limit: float, isolate: bool | None,
                     judge: Callable[[dict[str, Callable[..., Any]]], GradeResult]) -> GradeResult:
    """``judge``'s verdict on the proxies of the learner's functions, loaded in the sandboxed worker."""
    source = Path(solution) if not isinstance(solution, dict) else solution
    with Worker(source, exercise.functions, exercise_points(exercise.pieces), time_limit, isolate) as worker:
        result = not_loaded(exercise, worker.load())
        if result is None:
            result = judge(worker.proxies(exercise.pieces))
        result.output = worker.close()
        result.isolated = worker.isolated
    return result


@dataclass(frozen=True)
class EngineExercise(Exercise):
    pieces: tuple[Piece, ...]
    workloads: tuple[GradedWorkload, ...]
    # The events that say what the learner's function decided, compared with the reference's in order: the
    # scheduling and block decisions, and for an execution-layer piece the event its result shows in.
    decisions: tuple[str, ...] = DECISION_EVENTS
    # What the exercise says about a first difference in an event of its own (a slot mapping, a replayed graph),
    # from the divergence and the reference trace; None, or None said: the sequence behind it (``verdict``).
    context: Callable[[Divergence, Trace], str | None] | None = None

    def _run_student(self, watch: Watch, proxies: dict[str, Callable[..., Any]], folder: Path,
                     model: str | Path | None) -> None:
        """The grading child's body."""
        outcome = Outcome()
        path = folder / OUTCOME
        for workload in self.workloads:
            failure = None
            try:
                with installed(self.pieces, proxies, watch):
                    record_graded(workload, folder / f"{workload.name}.jsonl", model, MAX_STEPS)
            except BaseException as error:  # whatever the student's code raised is the verdict's business
                failure = describe_failure(error)
            outcome.runs[workload.name] = failure
            write_outcome(path, outcome)
            if failure is not None:
                break
        outcome.finished = True
        write_outcome(path, outcome)

    def grade(self, solution: SolutionSource, model: str | Path | None = None,
              time_limit: float = DEFAULT_TIME_LIMIT_S, isolate: bool | None = None) -> GradeResult:
        """``isolate`` (a file only): True needs bubblewrap, False runs the worker in a plain process, None
        takes bubblewrap where there is one."""
        problem = screened(solution, self.functions)
        if problem is not None:
            return self.fail(problem)
        references = PendingReferences(self.workloads, model)
        try:
            warm_up()
            return graded_in_worker(self, solution, time_limit, isolate,
                                    lambda proxies: self._run_and_judge(proxies, model, time_limit, references))
        finally:
            references.cancel()

    def _run_and_judge(self, proxies: dict[str, Callable[..., Any]], model: str | Path | None, time_limit: float,
                       references: PendingReferences) -> GradeResult:
        with tempfile.TemporaryDirectory(prefix="nanovllm_teach_grade_") as tmp:
            folder = Path(tmp)
            end = run_in_child(self._run_student, proxies, folder, model, time_limit=time_limit)
            outcome = read_outcome(folder / OUTCOME, Outcome)
            return self._verdict(end, outcome, folder, references.traces())

    def _verdict(self, end: ChildEnd, outcome: Outcome, folder: Path, references: dict) -> GradeResult:
        """The verdict on the child's runs (an exercise judged by other measures gives its own)."""
        events = 0
        for workload in self.workloads:
            verdict = judge(self, self.decisions, workload, load_run(folder / f"{workload.name}.jsonl"),
                            run_failure(end, outcome, workload.name), references[workload.name])
            if verdict is not None:
                return verdict
            events += sum(e.event in self.decisions for e in references[workload.name].events)
        if not outcome.finished or end.exitcode != 0:
            return self.fail(say(ENDED_AFTER_THE_RUNS, code=end.exitcode))
        functions = say(AND).join(self.functions)
        return GradeResult(self.name, True, f"PASS {self.name}: " + say(ALL_MATCH, functions=functions,
                                                                       count=len(self.workloads), decisions=events))
