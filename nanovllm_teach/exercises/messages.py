"""The errors a learner or a teacher reads when an exercise, a hint or the grading sandbox is asked for what
it cannot give, in English and Chinese. The verdicts are ``verdict.py``'s.

Role: grading. Pure data. Emits no events.
"""

from __future__ import annotations

from nanovllm_teach.i18n import Text

UNKNOWN_EXERCISE = Text(en="unknown exercise {name!r}; the exercises are: {names}", zh="没有练习 {name!r}；现有的练习：{names}")
TOO_MANY_FUNCTIONS = Text(en="{exercise} takes {count} function(s): {names}", zh="{exercise} 只接受 {count} 个函数：{names}")
NO_SUCH_HINT = Text(en="{exercise} has hints 1 to {count}, not {level!r}",
                    zh="{exercise} 的提示编号是 1 到 {count}，没有 {level!r}")
NAME_SEPARATOR = Text(en=", ", zh="、")  # between the names of a list in a sentence

# The grading sandbox's job slots, on the machine that grades.
LOCKS_NOT_OURS = Text(en="{path} belongs to another user: remove it", zh="{path} 属于另一个用户：请删除它")
NO_FREE_SLOT = Text(en="all {slots} job slots (user ids {first}-{last}) are in use",
                    zh="全部 {slots} 个作业槽位（用户 id {first}-{last}）都在使用中")
PROCESSES_OUTLIVED = Text(en="processes {pids} of user id {uid} outlived the grade",
                          zh="用户 id {uid} 的进程 {pids} 在评分结束后仍未退出")
CGROUP_NOT_REMOVED = Text(en="cannot remove the sandbox's cgroup {path}: {why}", zh="无法删除沙箱的 cgroup {path}：{why}")
