"""Exercise ``trace_quiz``: reading a trace, a quiz on a recorded run.

Beside this definition: ``template.py`` to start from, ``solution.py`` the reference.
"""

from __future__ import annotations

from nanovllm_teach.exercises.quiz_grading import QUESTIONS, QuizExercise

EXERCISE = QuizExercise(
    "trace_quiz", "Reading a trace: a quiz on a recorded run",
    "no engine code: trace.steps, trace.requests and the events", ("answer_quiz",),
    ("Print format_step_table(trace.steps) and format_request_table(trace.requests): every answer is in "
     "one of the two tables.",
     "Each question's key names a column or a count: StepRow.phase, .batch_size, .used_blocks, .preempted; "
     "RequestRow.num_preemptions, .finish_step. A wrong answer's message says where to look."),
    QUESTIONS)
