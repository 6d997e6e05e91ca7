"""The words of the replay page (``viz/page.py``) and of the live view around it (``serve``'s ``/live``), in
both languages from one source, as every learner-facing text is (``i18n``). A page carries both languages
and switches between them without a reload, so it is given both (``in_both``); its script reads them by key.

Part of the torch-free viz layer. Emits no events.
"""

from __future__ import annotations

from nanovllm_teach.i18n import LANGS, Text

# The replay page's labels, headings, legends and tooltips; ``{name}`` fields are filled in by the script.
REPLAY_WORDS: dict[str, Text] = {
    "replay": Text(en="Replay", zh="回放"),
    "step": Text(en="step", zh="步"),
    "of": Text(en="of", zh="/"),
    "timelines": Text(en="Timelines", zh="时间线"),
    "requests": Text(en="Requests", zh="请求"),
    "queues": Text(en="Queues at the end of the step", zh="本步结束时的队列"),
    "blocks": Text(en="KV blocks at the end of the step", zh="本步结束时的 KV 块"),
    "lines": Text(en="TEACHING lines of the step", zh="本步的 TEACHING 日志"),
    "play": Text(en="▶ play", zh="▶ 播放"),
    "pause": Text(en="❚❚ pause", zh="❚❚ 暂停"),
    "tokens": Text(en="tokens", zh="个 token"),
    "waiting": Text(en="waiting", zh="等待队列"),
    "running": Text(en="running", zh="运行队列"),
    "finished": Text(en="finished this step", zh="本步结束"),
    "preemptedNote": Text(en="(underlined: preempted)", zh="（下划线：被抢占）"),
    "noLines": Text(en="(no TEACHING line in this step)", zh="（本步没有 TEACHING 日志）"),
    "used": Text(en="used", zh="已用"),
    "shared": Text(en="shared", zh="共享"),
    "cached": Text(en="cached", zh="已缓存"),
    "free": Text(en="free", zh="空闲"),
    "blocksOf": Text(en="blocks", zh="块"),
    "cell": Text(en="one cell = {g} blocks, filled by occupancy", zh="一格 = {g} 块，按占用比例填充"),
    "hover": Text(en="hover or click a cell to read it", zh="悬停或点击格子查看"),
    "convention": Text(
        en="Every panel draws the state at the end of step N over step N; the red cursor is the step shown. "
           "Click a timeline or the Gantt chart to jump to a step.",
        zh="每个面板都把第 N 步结束时的状态画在第 N 步上；红色游标即当前步。点击时间线或甘特图可跳到该步。"),
    "batchSize": Text(en="batch size", zh="batch 大小"),
    "kvUsed": Text(en="KV blocks used (of {n})", zh="已用 KV 块（共 {n} 块）"),
    "latency": Text(en="step latency (ms)", zh="每步延迟（ms）"),
    "log": Text(en=", log", zh="，对数坐标"),
    "queuesLabel": Text(en="queues: waiting", zh="队列：等待"),
    "runningLabel": Text(en="running", zh="运行"),
    "preemption": Text(en="▼ preemption", zh="▼ 抢占"),
    "cachedLegend": Text(en="cached (free, hashed)", zh="已缓存（空闲，仍有哈希）"),
    "timelinesAria": Text(en="timelines", zh="时间线"),
    "ganttAria": Text(en="request Gantt chart", zh="请求甘特图"),
    "back": Text(en="◀ back", zh="◀ 上一步"),
    "forward": Text(en="forward ▶", zh="下一步 ▶"),
    "backTitle": Text(en="step back (← key)", zh="上一步（← 键）"),
    "forwardTitle": Text(en="step forward (→ key)", zh="下一步（→ 键）"),
    "playTitle": Text(en="play / pause (space)", zh="播放 / 暂停（空格键）"),
    "usedBySeq": Text(en="used (colour: its seq)", zh="已用（颜色：所属序列）"),
    "freed": Text(en="freed at the step's end", zh="本步结束时释放"),
    "sharedRefs": Text(en="shared (×refs)", zh="共享（×引用数）"),
    "groupUsed": Text(en="used (colour: the seq of its first used block; filled by the share used)",
                      zh="已用（颜色：格内第一个已用块所属的序列；填充高度为已用比例）"),
    "ganttRows": Text(en="{n} requests, one row each: scroll the chart", zh="共 {n} 个请求，每个一行：可滚动查看"),
}

# A request's state in the Gantt chart.
STATE_WORDS: dict[str, Text] = {
    "waiting": Text(en="waiting", zh="等待"),
    "preempted": Text(en="preempted", zh="被抢占后等待"),
    "prefill": Text(en="prefill", zh="预填充"),
    "decode": Text(en="decode", zh="解码"),
    "stalled": Text(en="stalled", zh="停顿（他人在预填充）"),
    "held": Text(en="held (finished, slot kept)", zh="占位（已结束，名额保留）"),
}

# What reads the same in both languages: symbols, and the field's own word for a batch.
SAME_WORDS: dict[str, str] = {"batch": "batch", "none": "—", "finishes": "● EOS   | max_tokens"}

# The live view's ticker and its switch.
LIVE_WORDS: dict[str, Text] = {
    "idle": Text(en="Live: waiting for the first request…", zh="实时：等待第一个请求…"),
    "live": Text(en="Live", zh="实时"),
    "step": Text(en="step", zh="步"),
    "running": Text(en="running", zh="运行"),
    "waiting": Text(en="waiting", zh="等待"),
    "blocks": Text(en="KV blocks used", zh="已用 KV 块"),
    "full": Text(en="(the page stops here: too many events to keep)", zh="（页面到此为止：事件太多，不再保留）"),
    "lost": Text(en="Live: the server is gone", zh="实时：服务器已停止"),
    "follow": Text(en="follow the newest step", zh="跟随最新的步"),
}


def in_both(words: dict[str, Text], same: dict[str, str] | None = None,
            nested: dict[str, dict[str, Text]] | None = None) -> dict[str, dict[str, object]]:
    """``{lang: {key: words}}`` for every language: each ``Text`` in that language, the ``same`` words as
    they are, each ``nested`` table as a table of its own under its key."""
    return {lang: {**(same or {}), **{key: text.in_lang(lang) for key, text in words.items()},
                   **{key: {k: t.in_lang(lang) for k, t in table.items()} for key, table in (nested or {}).items()}}
            for lang in LANGS}


def replay_words() -> dict[str, dict[str, object]]:
    """The replay page's words in every language, as its script reads them (``UI[lang][key]``)."""
    return in_both(REPLAY_WORDS, SAME_WORDS, {"state": STATE_WORDS})


def live_words() -> dict[str, dict[str, object]]:
    """The live view's words in every language (the batch is "batch" in both)."""
    return in_both(LIVE_WORDS, {"batch": SAME_WORDS["batch"]})
