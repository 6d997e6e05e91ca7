"""The gradebook of a graded class, written three ways: CSV, an HTML page, Gradescope's ``results.json``.

Role: grading (the teacher's side). Emits no events.

The CSV is UTF-8 with a byte-order mark, so that a spreadsheet reads the names right, and no cell starts
with ``= + - @`` (a spreadsheet would run it as a formula). Written over an earlier gradebook of the same
exercise (``carried_over``), the students graded now replace their rows, the others stay, and ``attempts``
counts the gradings; for an exercise ``graded_once`` (answers a blind search could find) the first verdict
stays. The page escapes every student's text; each student's log goes in a folder beside it, named by the
row's number. ``results.json`` has the fields Gradescope's documentation names.
"""

from __future__ import annotations

import csv
import html
import json
from pathlib import Path
from urllib.parse import quote

from nanovllm_teach.exercises.base import Exercise, visible
from nanovllm_teach.exercises.classroom import Row, folded, printable, rank
from nanovllm_teach.exercises.similarity import MIN_TOKENS, Likeness
from nanovllm_teach.i18n import Text, resolve_lang, say

COLUMNS = ("student", "exercise", "verdict", "score", "seconds", "attempts", "reason", "tokens", "like_reference",
           "most_alike", "like_them", "similarity_flags")
POLICY_COLUMNS = ("latency", "rank")

SUMMARY = Text(en="{total} graded: {passed} PASS, {failed} FAIL, {errors} ERROR",
               zh="共评 {total} 份：{passed} 份通过（PASS），{failed} 份未通过（FAIL），{errors} 份无法评分（ERROR）")
TITLE = Text(en="Gradebook: {exercise}", zh="成绩册：{exercise}")
HEADINGS = {
    "student": Text(en="Student", zh="学生"), "verdict": Text(en="Verdict", zh="结果"),
    "score": Text(en="Score", zh="得分"), "seconds": Text(en="Seconds", zh="秒"),
    "reason": Text(en="Reason", zh="原因"), "latency": Text(en="Latency against FCFS", zh="相对 FCFS 的延迟"),
    "rank": Text(en="Rank", zh="名次"), "attempts": Text(en="Attempts", zh="评分次数"),
    "output": Text(en="What the code printed (quoted)", zh="代码打印的内容（引用）"), "log": Text(en="Log", zh="日志"),
    "tokens": Text(en="Tokens", zh="token 数"), "like_reference": Text(en="Like the reference", zh="与参考答案相同"),
    "most_alike": Text(en="Most alike", zh="最相似的同学"), "like_them": Text(en="In common", zh="相同部分"),
    "note": Text(en="To look at", zh="值得一看"),
}
SIMILARITY = Text(en="Similarity (advice, not a verdict)", zh="相似度（仅供参考，不是评分）")
SIMILARITY_SAYS = Text(
    en="The share of each submission's code found in the reference solution and in the most alike other "
       "submission (copydetect: names and strings aside, the template taken out). Answers under {least} tokens "
       "are not compared: a short right answer looks like every other. A copy of the reference's own text (a hard "
       "link to it included) is flagged at any size. A build-track chapter's right answer resembles the engine by "
       "design: there the column \"Like the reference\" stays empty and only such copies are flagged. The engine "
       "and its reference solutions are public: read two files side by side before concluding anything.",
    zh="每份作业的代码中，有多少能在参考答案里、在最相似的另一份作业里找到（copydetect：不计命名和字符串，去掉了模板）。"
       "短于 {least} 个 token 的答案不作比较：简短的正确答案彼此都很像。照抄参考答案原文（包括指向它的硬链接），无论长短"
       "都会标出。自己动手构建（build track）的章节，正确答案本来就和引擎相像：那里“与参考答案相同”一列留空，只标出这样的"
       "照抄。引擎和参考答案都是公开的：下结论之前，请把两份文件放在一起读一读。")
PRINTED = Text(en="what the code printed (quoted, not a verdict):", zh="代码打印的内容（引用，不是评语）：")
CANNOT_READ = Text(en="cannot read the gradebook {path}: {error}", zh="无法读取成绩册 {path}：{error}")
NOT_A_GRADEBOOK = Text(en="{path} is not a gradebook of {exercise} (its columns or its exercise differ): write to "
                          "another file",
                       zh="{path} 不是 {exercise} 的成绩册（列或练习不同）：请写到另一个文件")
LEADERBOARD = Text(en="Leaderboard: mean time to first token against first come, first served (lower is better)",
                   zh="排行榜：平均首 token 延迟相对先来先服务（FCFS）的比值（越低越好）")
NOBODY_RANKED = Text(en="No policy ran to the end: nobody is ranked.", zh="没有策略运行完：无人上榜。")


def summary(rows: list[Row]) -> str:
    count = {v: sum(r.verdict == v for r in rows) for v in ("PASS", "FAIL", "ERROR")}
    return say(SUMMARY, total=len(rows), passed=count["PASS"], failed=count["FAIL"], errors=count["ERROR"])


def _has_latency(rows: list[Row]) -> bool:
    return any(r.latency is not None for r in rows)


def _share(value: float | None) -> str:
    return "" if value is None else f"{value:.2f}"


def _values(row: Row) -> dict[str, str]:
    """Every column of ``row`` as text, as the CSV holds it and the page shows it."""
    alike = row.likeness or Likeness(0)
    return {"student": row.student, "exercise": row.exercise, "verdict": row.verdict, "score": f"{row.score:g}",
            "seconds": f"{row.seconds:.2f}", "attempts": str(row.attempts), "reason": row.reason,
            "latency": "" if row.latency is None else f"{row.latency:.3f}",
            "rank": "" if row.rank is None else str(row.rank),
            "output": row.result.output if row.result is not None else "",
            "tokens": "" if row.likeness is None else str(alike.tokens), "like_reference": _share(alike.reference),
            "most_alike": alike.closest or "", "like_them": _share(alike.closest_share),
            "similarity_flags": "; ".join(alike.flags), "note": alike.note}


_FORMULA = ("=", "+", "-", "@", "\t", "\r")


def _spreadsheet_safe(cell: str) -> str:
    return "'" + cell if cell[:1] in _FORMULA else cell


def write_csv(rows: list[Row], path: Path) -> None:
    columns = COLUMNS + (POLICY_COLUMNS if _has_latency(rows) else ())
    with path.open("w", encoding="utf-8-sig", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(columns)
        for row in rows:
            values = _values(row)
            writer.writerow([_spreadsheet_safe(values[c]) for c in columns])


def _number(cell: str) -> float | None:
    return float(cell) if cell else None


def _read_row(cells: dict[str, str]) -> Row:
    cells = {k: v[1:] if v[:1] == "'" and v[1:2] in _FORMULA else v for k, v in cells.items()}
    likeness = None if not cells["tokens"] else Likeness(
        int(cells["tokens"]), _number(cells["like_reference"]), cells["most_alike"] or None,
        _number(cells["like_them"]), tuple(f for f in cells["similarity_flags"].split("; ") if f))
    return Row(cells["student"], cells["exercise"], cells["verdict"], float(cells["score"]), float(cells["seconds"]),
               cells["reason"], latency=_number(cells.get("latency", "")), attempts=int(cells["attempts"]),
               likeness=likeness)


def read_csv(path: Path, exercise: str) -> list[Row]:
    """The rows of the gradebook ``path`` of ``exercise`` (ValueError, saying so, when it is not one)."""
    try:
        with path.open(encoding="utf-8-sig", newline="") as file:
            reader = csv.DictReader(file)
            found = list(reader)
            if not set(COLUMNS) <= set(reader.fieldnames or ()) or any(r["exercise"] != exercise for r in found):
                raise ValueError
            return [_read_row(r) for r in found]
    except OSError as error:
        raise ValueError(say(CANNOT_READ, path=path, error=error.strerror or error)) from None
    except (ValueError, KeyError, TypeError, UnicodeDecodeError, csv.Error):
        raise ValueError(say(NOT_A_GRADEBOOK, path=path, exercise=exercise)) from None


def carried_over(rows: list[Row], exercise: Exercise, earlier: Path | None) -> list[Row]:
    """``rows`` written over the gradebook ``earlier`` (None, or no file there: ``rows`` alone), in the
    students' order."""
    before = {r.student: r for r in read_csv(earlier, exercise.name)} if earlier and earlier.exists() else {}
    merged = []
    for row in rows:
        old = before.pop(row.student, None)
        if old is not None and exercise.graded_once:
            old.attempts += 1
            row = old
        elif old is not None:
            row.attempts = old.attempts + 1
        merged.append(row)
    merged += before.values()
    rank(merged)
    return sorted(merged, key=lambda r: folded(r.student))


_STYLE = """
body { font-family: system-ui, "Noto Sans CJK SC", sans-serif; margin: 2em; color: #222; }
table { border-collapse: collapse; margin: 1em 0; }
th, td { border: 1px solid #ccc; padding: 0.3em 0.6em; text-align: left; vertical-align: top; }
th { background: #f3f3f3; }
td.reason, td.note { max-width: 48em; font-size: 90%; white-space: pre-wrap; }
td.output { font-family: monospace; font-size: 85%; white-space: pre-wrap; max-width: 40em; }
.PASS { color: #1a7f37; font-weight: bold; } .FAIL { color: #b42318; font-weight: bold; }
.ERROR { color: #9a6700; font-weight: bold; }
"""


def _verdict(row: Row) -> str:
    # Without its verdict (an ERROR, or a row read back from an earlier gradebook): the row's own words.
    return printable(row.result.message if row.result is not None else f"{row.verdict} {row.exercise}: {row.reason}")


def _table(rows: list[Row], columns: tuple[str, ...], table_id: str, logs: list[str] | None = None) -> str:
    """The rows as a table; ``logs``: each row's log file, linked in a last column."""
    head = "".join(f"<th>{html.escape(say(HEADINGS[c]))}</th>" for c in columns + (("log",) if logs else ()))
    body = []
    for k, row in enumerate(rows):
        values = _values(row)
        cells = "".join(f'<td class="{c} {html.escape(values[c]) if c == "verdict" else ""}">'
                        f"{html.escape(values[c])}</td>" for c in columns)
        if logs:
            cells += f'<td class="log"><a href="{html.escape(quote(logs[k]))}">{html.escape(say(HEADINGS["log"]))}</a></td>'
        body.append(f"<tr>{cells}</tr>")
    return f'<table id="{table_id}"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'


def _write_logs(rows: list[Row], folder: Path) -> list[str]:
    """Each row's log in ``folder``, named by the row's number (a student's name is no file name to trust);
    their paths from the page."""
    folder.mkdir(exist_ok=True)
    names = []
    for k, row in enumerate(rows, 1):
        lines = [visible(row.student), _verdict(row)]
        if row.result is not None and row.result.output:
            lines += [say(PRINTED), row.result.output]
        if row.likeness is not None and row.likeness.note:
            lines.append(say(HEADINGS["note"]) + ": " + row.likeness.note)
        (folder / f"{k:03d}.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
        names.append(f"{folder.name}/{k:03d}.txt")
    return names


def write_html(rows: list[Row], exercise: str, path: Path) -> None:
    policy = _has_latency(rows)
    columns = ("student", "verdict", "score", "attempts", "seconds", "reason", "output") + (("latency",) if policy else ())
    logs = _write_logs(rows, path.parent / f"{path.stem}_logs")
    parts = [f"<h1>{html.escape(say(TITLE, exercise=exercise))}</h1>",
             f'<p id="summary">{html.escape(summary(rows))}</p>', _table(rows, columns, "gradebook", logs),
             f"<h2>{html.escape(say(SIMILARITY))}</h2>", f"<p>{html.escape(say(SIMILARITY_SAYS, least=MIN_TOKENS))}</p>",
             _table([r for r in rows if r.likeness is not None], ("student", "tokens", "like_reference", "most_alike",
                                                                  "like_them", "note"), "similarity")]
    if policy:
        ranked = sorted((r for r in rows if r.rank is not None), key=lambda r: r.rank)
        parts.append(f"<h2>{html.escape(say(LEADERBOARD))}</h2>")
        parts.append(_table(ranked, ("rank", "student", "latency", "verdict"), "leaderboard") if ranked
                     else f"<p>{html.escape(say(NOBODY_RANKED))}</p>")
    lang = "zh-CN" if resolve_lang() == "zh" else "en"
    page = (f'<!DOCTYPE html>\n<html lang="{lang}"><head><meta charset="utf-8">'
            f"<title>{html.escape(say(TITLE, exercise=exercise))}</title><style>{_STYLE}</style></head>"
            f"<body>{''.join(parts)}</body></html>\n")
    path.write_text(page, encoding="utf-8")


def write_gradescope(row: Row, seconds: float, path: Path) -> None:
    """Gradescope's ``results.json`` for one submission: one test (the exercise), worth 1 point."""
    output = _verdict(row)
    if row.result is not None and row.result.output:
        output = row.result.output + "\n" + output
    test = {"name": row.exercise, "score": row.score, "max_score": 1.0,
            "status": "passed" if row.verdict == "PASS" else "failed", "output": output}
    results = {"score": row.score, "execution_time": round(seconds, 3), "output": output, "tests": [test]}
    path.write_text(json.dumps(results, ensure_ascii=False, indent=2), encoding="utf-8")
