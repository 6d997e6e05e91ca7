"""Exercise ``trace_quiz``: reading a trace, a quiz on a recorded run.

Beside this definition: ``template.py`` to start from, ``solution.py`` the reference.
"""

from __future__ import annotations

from nanovllm_teach.exercises.trace_quiz.grading import QUESTIONS, QuizExercise
from nanovllm_teach.i18n import Text

ORDER = 130  # the course's order (``nanovllm-teach exercises``): reading a trace, after the engine's pieces

TITLE = Text(en='Reading a trace: a quiz on a recorded run',
             zh='读 trace：关于一次记录的运行的小测验')
# Hints from the gentlest to the strongest; none of them is the code.
HINTS = (
    Text(en=('Print format_step_table(trace.steps) and format_request_table(trace.requests): every '
             'answer is in one of the two tables.'),
         zh=('打印 format_step_table(trace.steps) 和 format_request_table(trace.requests)：'
             '每个答案都在这两张表之一里。')),
    Text(en=("Each question's key names a column or a count: StepRow.phase, .batch_size, "
             ".used_blocks, .preempted; RequestRow.num_preemptions, .finish_step. A wrong answer's "
             'message says where to look.'),
         zh=('每个问题的键名对应一列或一个计数：StepRow.phase、.batch_size、.used_blocks、.preempted；'
             'RequestRow.num_preemptions、.finish_step。答错时的提示会告诉你去哪里看。')),
)


EXERCISE = QuizExercise(
    "trace_quiz", TITLE,
    Text(en="no engine code: trace.steps, trace.requests and the events",
         zh="不改引擎代码：只读 trace.steps、trace.requests 和事件"), ("answer_quiz",),
    HINTS,
    QUESTIONS)
