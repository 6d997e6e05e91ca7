"""The build track: the errors a learner reads when a chapter's stub cannot be replaced or the sandbox's channel
carries what is not an answer, in English and Chinese (``say(NAME, field=value)`` where the error is raised;
the sandbox quotes the channel's in its own verdict line).

Role: teaching (the track). Pure data. Emits no events.
"""

from __future__ import annotations

from nanovllm_teach.i18n import Text

ALREADY_WRITTEN = Text(en="{qualname} in {path} is written already: only a stub is replaced",
                       zh="{path} 中的 {qualname} 已经写好了：只有桩函数（stub）才会被替换")

# The channel between the check and the learner's code in the sandbox (``wire``).
FRAME_TOO_LARGE = Text(en="a frame of {size} bytes is larger than {most}", zh="一帧 {size} 字节，超过了上限 {most} 字节")
CHANNEL_CLOSED = Text(en="the channel closed", zh="通道已关闭")
NOT_A_FRAME = Text(en="a frame that is not a Frame: {why}", zh="收到的帧不是 Frame：{why}")
TENSORS_DO_NOT_READ = Text(en="tensors that do not read: {why}", zh="张量无法读取：{why}")
NOT_A_VALUE = Text(en="an answer that is not a value", zh="回答不是一个值")
NOT_A_FRESH_MODEL = Text(en="a model's state for what is not a fresh model", zh="传回了模型状态，但对应的参数不是一个新建的模型")
RESULT_TOO_LARGE = Text(en="its result is too large: {why}", zh="它的结果太大：{why}")
