"""The gradebook of a graded class, written three ways: CSV, an HTML page, Gradescope's ``results.json``.

Role: grading (the teacher's side). Emits no events.

- ``write_csv``: one row per student, ``student, exercise, verdict, score, seconds, reason`` (and for the
  scheduling policy ``latency, rank``), UTF-8 with a byte-order mark so that a spreadsheet reads the names
  right, and no cell starting with ``= + - @`` (a spreadsheet would run it as a formula);
- ``write_html``: a page (the summary, the table, and the policy's leaderboard), every student's text
  escaped;
- ``gradescope_results``: Gradescope's autograder results (the fields its documentation names: ``score``,
  ``execution_time``, ``output``, ``tests`` with ``name``, ``score``, ``max_score``, ``status``,
  ``output``) for one submission.

Page words are ``Text`` in both languages, said in the chosen one.
"""

from __future__ import annotations

import csv
import html
import json
from pathlib import Path
from typing import Any

from nanovllm_teach.exercises.classroom import Row, printable
from nanovllm_teach.i18n import Text, resolve_lang, say

COLUMNS = ("student", "exercise", "verdict", "score", "seconds", "reason")
POLICY_COLUMNS = ("latency", "rank")

SUMMARY = Text(en="{total} graded: {passed} PASS, {failed} FAIL, {errors} ERROR",
               zh="共评 {total} 份：{passed} 份通过（PASS），{failed} 份未通过（FAIL），{errors} 份无法评分（ERROR）")
TITLE = Text(en="Gradebook: {exercise}", zh="成绩册：{exercise}")
HEADINGS = {
    "student": Text(en="Student", zh="学生"), "verdict": Text(en="Verdict", zh="结果"),
    "score": Text(en="Score", zh="得分"), "seconds": Text(en="Seconds", zh="秒"),
    "reason": Text(en="Reason", zh="原因"), "latency": Text(en="Latency against FCFS", zh="相对 FCFS 的延迟"),
    "rank": Text(en="Rank", zh="名次"),
}
LEADERBOARD = Text(en="Leaderboard: mean time to first token against first come, first served (lower is better)",
                   zh="排行榜：平均首 token 延迟相对先来先服务（FCFS）的比值（越低越好）")
NOBODY_RANKED = Text(en="No policy ran to the end: nobody is ranked.", zh="没有策略运行完：无人上榜。")


def summary(rows: list[Row]) -> str:
    """One line: how many were graded, and how many of each verdict."""
    count = {v: sum(r.verdict == v for r in rows) for v in ("PASS", "FAIL", "ERROR")}
    return say(SUMMARY, total=len(rows), passed=count["PASS"], failed=count["FAIL"], errors=count["ERROR"])


def _has_latency(rows: list[Row]) -> bool:
    return any(r.latency is not None for r in rows)


def _cells(row: Row, policy: bool) -> list[str]:
    cells = [row.student, row.exercise, row.verdict, f"{row.score:g}", f"{row.seconds:.2f}", row.reason]
    if policy:
        cells += ["" if row.latency is None else f"{row.latency:.3f}", "" if row.rank is None else str(row.rank)]
    return cells


def _spreadsheet_safe(cell: str) -> str:
    return "'" + cell if cell[:1] in ("=", "+", "-", "@", "\t", "\r") else cell


def write_csv(rows: list[Row], path: Path) -> None:
    policy = _has_latency(rows)
    with path.open("w", encoding="utf-8-sig", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(COLUMNS + (POLICY_COLUMNS if policy else ()))
        for row in rows:
            writer.writerow([_spreadsheet_safe(cell) for cell in _cells(row, policy)])


_STYLE = """
body { font-family: system-ui, "Noto Sans CJK SC", sans-serif; margin: 2em; color: #222; }
table { border-collapse: collapse; margin: 1em 0; }
th, td { border: 1px solid #ccc; padding: 0.3em 0.6em; text-align: left; vertical-align: top; }
th { background: #f3f3f3; }
td.reason { max-width: 48em; font-size: 90%; white-space: pre-wrap; }
.PASS { color: #1a7f37; font-weight: bold; } .FAIL { color: #b42318; font-weight: bold; }
.ERROR { color: #9a6700; font-weight: bold; }
"""


def _table(rows: list[Row], columns: tuple[str, ...], table_id: str) -> str:
    head = "".join(f"<th>{html.escape(say(HEADINGS[c]))}</th>" for c in columns)
    body = []
    for row in rows:
        values = {"student": row.student, "verdict": row.verdict, "score": f"{row.score:g}",
                  "seconds": f"{row.seconds:.2f}", "reason": row.reason,
                  "latency": "" if row.latency is None else f"{row.latency:.3f}",
                  "rank": "" if row.rank is None else str(row.rank)}
        cells = "".join(f'<td class="{c} {html.escape(values[c]) if c == "verdict" else ""}">'
                        f"{html.escape(values[c])}</td>" for c in columns)
        body.append(f"<tr>{cells}</tr>")
    return f'<table id="{table_id}"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'


def write_html(rows: list[Row], exercise: str, path: Path) -> None:
    policy = _has_latency(rows)
    columns = ("student", "verdict", "score", "seconds", "reason") + (("latency",) if policy else ())
    parts = [f"<h1>{html.escape(say(TITLE, exercise=exercise))}</h1>",
             f'<p id="summary">{html.escape(summary(rows))}</p>', _table(rows, columns, "gradebook")]
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


def gradescope_results(row: Row, seconds: float) -> dict[str, Any]:
    """Gradescope's ``results.json`` for one submission: one test (the exercise), worth 1 point."""
    output = printable(row.result.message if row.result is not None else f"ERROR {row.exercise}: {row.reason}")
    if row.result is not None and row.result.output:
        output = row.result.output + "\n" + output
    status = "passed" if row.verdict == "PASS" else "failed"
    return {"score": row.score, "execution_time": round(seconds, 3), "output": output,
            "tests": [{"name": row.exercise, "score": row.score, "max_score": 1.0, "status": status,
                       "output": output}]}


def write_gradescope(row: Row, seconds: float, path: Path) -> None:
    path.write_text(json.dumps(gradescope_results(row, seconds), ensure_ascii=False, indent=2), encoding="utf-8")
