"""The ``nanovllm-teach`` command: the demo produces its log, trace and picture; record regenerates a trace;
every mistake a user can make on the command line ends in one line and exit status 2, before any work."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import wcwidth

from nanovllm_teach.cli import build_parser, main
from nanovllm_teach.trace import load_trace

SMALL_TRACE = Path(__file__).resolve().parent / "data" / "small_trace.jsonl"


def _run(argv: list[str]) -> int:
    """``main(argv)``'s exit status, argparse's own exits included."""
    try:
        return main(argv)
    except SystemExit as exit_info:
        return exit_info.code


def test_demo_prints_the_answers_then_a_short_account(tmp_path, capsys):
    assert main(["demo", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert len(lines) <= 40, out  # one screen
    assert "TEACHING/" not in out  # the full log only with --log
    # The answers first, then what the engine did, then where the files are.
    assert out.index("Completion:") < out.index("What the engine did") < out.index("trace:")
    assert "finished on eos" in out and "finished on length" in out
    assert "<|im_end|>" not in out  # special tokens are left out of the text
    assert "admitted seqs 0, 1" in out
    assert "seq 0 finished at step" in out and "the batch shrinks to 1" in out
    assert "KV use: peak 2 of" in out
    trace = load_trace(tmp_path / "demo_trace.jsonl")
    assert trace.header["config"]["max_num_seqs"] == 512
    assert trace.steps[0].phase == "prefill" and trace.steps[0].batch_size == 2
    # As in the reference nano-vllm run: one answer ends on EOS, the other is cut at max_tokens.
    reasons = sorted(r.finish_reason for r in trace.requests)
    assert reasons == ["eos", "length"], reasons
    eos = next(r for r in trace.requests if r.finish_reason == "eos")
    assert f"seq {eos.seq_id} finished at step {eos.finish_step} (eos)" in out
    assert f"steps 2-{eos.finish_step}  " in out  # the decode steps over the full batch are one line
    picture = tmp_path / "demo_timeline.png"
    assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert f"trace:    {tmp_path / 'demo_trace.jsonl'}" in out and f"timeline: {picture}" in out


def test_demo_log_streams_the_teaching_log(tmp_path, capsys):
    assert main(["demo", "--out", str(tmp_path), "--log", "normal", "--lang", "zh"]) == 0
    out = capsys.readouterr().out
    assert "TEACHING/SCHEDULE_PREFILL | phase=prefill | reason=waiting 队列有可准入请求" in out
    assert "step#1 prefill 完成，用时" in out
    # The log comes as it happens, before the answers; the account, in Chinese, still ends the output.
    assert out.index("TEACHING/") < out.index("回答：") < out.index("引擎做了什么")
    assert "Completion:" not in out and "What the engine did" not in out
    assert "PREPARE_DECODE_TENSORS" not in out  # execution events only from --log detail


def test_record_unknown_scenario_is_an_error(capsys):
    assert main(["record", "no_such_scenario"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("nanovllm-teach: error: unknown scenario 'no_such_scenario'; choose from: walkthrough,")
    assert err.count("\n") == 1


def _mistakes(tmp: Path) -> list[tuple[list[str], str]]:
    bad = tmp / "bad.jsonl"
    bad.write_text('{"schema": "nanovllm_teach.trace", "version": 1}\nnot json\n')
    trace = str(SMALL_TRACE)
    return [
        (["replay", str(tmp)], "is a folder, not a trace file"),
        (["compare", trace, str(tmp)], "is a folder, not a trace file"),
        (["diff", str(tmp), trace], "is a folder, not a trace file"),
        (["replay", str(bad)], "cannot replay"),
        (["diff", trace, str(bad)], "cannot replay"),
        (["replay", str(tmp / "none.jsonl")], "no such trace file"),
        (["replay", trace, "--out", str(tmp)], "is a folder: give a file name"),
        (["replay", trace, "--html", str(tmp)], "is a folder: give a file name"),
        (["replay", trace, "--out", "/proc/x.png"], "cannot be written"),
        (["replay", trace, "--html", "/proc/x.html"], "cannot be written"),
        (["replay", trace, "--out", str(tmp / "x.gif")], "the picture format follows the suffix"),
        (["compare", trace, trace, "--out", str(tmp / "x.jpg")], "the picture format follows the suffix"),
        (["compare", trace, trace, "--out", str(tmp)], "is a folder"),
        (["demo", "--max-tokens", "0"], "argument --max-tokens: must be >= 1, got 0"),
        (["demo", "--temperature", "-1"], "argument --temperature: must be >= 0, got -1"),
        (["demo", "--log", "loud"], "argument --log: invalid choice: 'loud'"),
        (["demo", "--model", "/no/such/dir"], "--model /no/such/dir: no such folder"),
        (["demo", "--out", "/proc/x"], "--out /proc/x cannot be created"),
        (["demo", "--out", trace], "is a file, not a folder"),
        (["record"], "record needs a SCENARIO or --all"),
        (["record", "walkthrough", "--out-dir", "/proc/x"], "--out-dir /proc/x cannot be created"),
        (["grade", "decode_slot", str(tmp / "class")], "no such file or folder"),
        (["hint", "decode_slot", "9"], "decode_slot has hints 1 to 2, not 9"),
        (["replay"], "the following arguments are required: trace"),
    ]


@pytest.mark.parametrize("case", range(23))
def test_every_mistake_is_one_line_and_exit_status_2(tmp_path, capsys, case):
    argv, says = _mistakes(tmp_path)[case]
    assert _run(argv) == 2, argv
    out, err = capsys.readouterr()
    assert err.startswith("nanovllm-teach: error: ") and err.count("\n") == 1, err
    assert says in err, err
    assert out == ""  # refused before any work: no table, no log
    assert sorted(p.name for p in tmp_path.iterdir()) in ([], ["bad.jsonl"])  # nothing written


def test_help_shows_no_markup(capsys):
    for argv in (["--help"], ["demo", "--help"], ["replay", "--help"], ["grade", "--help"]):
        assert _run(argv) == 0
        text = capsys.readouterr().out
        assert "``" not in text and text.startswith("usage: nanovllm-teach")
    assert "``" not in build_parser().description


# Every command's --help, and the ones under a command (exercises start, build start/check).
HELP_COMMANDS = [[], ["demo"], ["record"], ["replay"], ["compare"], ["diff"], ["exercises"], ["exercises", "start"],
                 ["hint"], ["grade"], ["build"], ["build", "start"], ["build", "check"], ["simulate"], ["plan"],
                 ["serve"]]


def _help(argv: list[str], capsys) -> str:
    assert _run(argv) == 0, argv
    return capsys.readouterr().out


@pytest.mark.parametrize("command", HELP_COMMANDS, ids=lambda command: " ".join(command) or "nanovllm-teach")
def test_help_speaks_the_language_asked_for(command, monkeypatch, capsys):
    """``--lang zh`` anywhere on the line gives the whole ``--help`` in Chinese (argparse's headings too): no
    English prose in it; the English is the same help, held to the glossary against the Chinese."""
    from nanovllm_teach.i18n import ENV_VAR
    from nanovllm_teach.i18n.notebooks import english_runs, pair_problems

    monkeypatch.delenv(ENV_VAR, raising=False)
    monkeypatch.setenv("COLUMNS", "80")
    zh = _help([*command, "--help", "--lang", "zh"], capsys)
    assert zh.startswith("用法：nanovllm-teach") and "显示本帮助并退出" in zh
    assert english_runs(zh) == [], zh
    # Its sentences wrapped by the columns a line takes on the terminal (a Chinese character takes two), not by
    # its length (the usage and the list of commands are argparse's, as in English).
    usage = zh.split("\n\n")[0]
    first, *later = usage.splitlines()  # its later lines under the first's arguments, as in English
    assert all(len(line) - len(line.lstrip()) == wcwidth.width(first[:first.index("[")]) for line in later), usage
    assert [line for line in zh[len(usage):].splitlines()
            if re.search("[\u4e00-\u9fff]", line) and wcwidth.width(line) > 80] == [], zh
    en = _help([*command, "--lang", "en", "--help"], capsys)
    assert en.startswith("usage: nanovllm-teach") and "show this help message and exit" in en
    # Each option explained in both languages by the glossary's terms.
    assert [p for p in pair_problems(en, zh, " ".join(command), set()) if "in brackets" not in p] == []


def test_help_follows_the_environment_then_the_locale_and_lang_goes_anywhere(monkeypatch, capsys):
    from nanovllm_teach import i18n

    monkeypatch.delenv(i18n.ENV_VAR, raising=False)
    for name in ("LC_ALL", "LC_MESSAGES"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("LANG", "zh_CN.UTF-8")
    assert _help(["plan", "--help"], capsys).startswith("用法：")
    monkeypatch.setenv(i18n.ENV_VAR, "en")
    assert _help(["plan", "--help"], capsys).startswith("usage: ")
    assert _help(["--lang", "zh", "plan", "--help"], capsys).startswith("用法：")  # before the command too
    assert i18n._chosen is None  # the language asked for lasts for the command only
    parser = build_parser()
    assert parser.parse_args(["--lang", "zh", "hint", "x"]).lang == "zh"
    assert parser.parse_args(["--lang", "zh", "hint", "x", "--lang", "en"]).lang == "en"  # the last one said
    assert parser.parse_args(["hint", "x"]).lang is None
    monkeypatch.setenv(i18n.ENV_VAR, "fr")  # a bad language is named, in one line, before any help,
    assert _run(["plan", "--help"]) == 2  # in the locale's language (LANG=zh_CN): the variable is the mistake
    assert capsys.readouterr().err == "nanovllm-teach: error: NANOVLLM_TEACH_LANG 必须是 en, zh 之一，收到的是 'fr'\n"


@pytest.mark.parametrize(("argv", "says"), [(["demo", "--lang"], "expected one argument"),
                                            (["demo", "--lang", "fr", "--help"], "invalid choice: 'fr'")])
def test_a_bad_lang_is_refused_in_one_line_even_with_help(argv, says, capsys):
    assert _run(argv) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("nanovllm-teach: error: ") and err.count("\n") == 1 and says in err, err


@pytest.mark.parametrize("argv", [["replay", str(SMALL_TRACE), "--htm", "x.html"], ["demo", "--max-tok", "8"],
                                  ["record", "walkthrough", "--out", "x"]])
def test_an_abbreviated_option_is_refused(tmp_path, capsys, monkeypatch, argv):
    """``--htm`` is not taken for ``--html``: a typo is told, never guessed (exit 2, one line, nothing written)."""
    monkeypatch.chdir(tmp_path)
    assert _run(argv) == 2
    out, err = capsys.readouterr()
    assert err.startswith("nanovllm-teach: error: unrecognized arguments: ") and err.count("\n") == 1, err
    assert out == "" and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("module", ["nanovllm_teach.trace.docs", "nanovllm_teach.i18n.notebooks"])
def test_the_package_s_other_commands_refuse_an_abbreviated_option(module, capsys):
    """``python -m ...`` commands of the package: ``--chec`` is not taken for ``--check``."""
    import importlib

    with pytest.raises(SystemExit) as exit_info:
        importlib.import_module(module).main(["--chec"])
    assert exit_info.value.code == 2 and "unrecognized arguments: --chec" in capsys.readouterr().err


def test_record_writes_under_out_and_leaves_the_shipped_traces_alone(tmp_path, monkeypatch, capsys):
    """Without --out-dir a recording goes to out/; only --out-dir traces regenerates a shipped trace."""
    monkeypatch.chdir(tmp_path)
    assert main(["record", "walkthrough"]) == 0
    assert sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*")) == ["out", "out/walkthrough.jsonl"]
    assert load_trace(tmp_path / "out" / "walkthrough.jsonl").header["scenario"] == "walkthrough"
    assert f"-> {Path('out') / 'walkthrough.jsonl'}" in capsys.readouterr().out


@pytest.mark.parametrize("argv", [["simulate", "--bogus"], ["replay"], ["simulate", "--requests", "x"],
                                  ["replay", str(SMALL_TRACE), "--lang", "fr"], ["simulate", "--rate"],
                                  ["grade", "decode_slot", "x.py", "--jobs", "0"],
                                  ["grade", "decode_slot", "x.py", "--time-limit", "-1"]],
                         ids=lambda argv: " ".join(argv[:3]))
def test_argparse_mistakes_speak_the_language_asked_for(argv, monkeypatch, capsys):
    """argparse's own messages (a missing argument, a bad value, an unknown option) in Chinese when Chinese is
    asked for: one line, exit 2, no English prose; in English, argparse's words as they were."""
    from nanovllm_teach.i18n import ENV_VAR
    from nanovllm_teach.i18n.notebooks import english_runs

    monkeypatch.setenv(ENV_VAR, "zh")
    assert _run(argv) == 2
    zh = capsys.readouterr().err
    assert zh.startswith("nanovllm-teach: error: ") and zh.count("\n") == 1, zh
    said = zh.removeprefix("nanovllm-teach: error: ")
    assert english_runs(said) == [] and re.search("[\u4e00-\u9fff]", said.split("（见")[0]), zh
    assert not re.search(r"\b(argument|arguments|invalid|expected|required|unrecognized|choose|must|got)\b", zh), zh
    monkeypatch.setenv(ENV_VAR, "en")
    assert _run(argv) == 2
    en = capsys.readouterr().err
    assert re.search(r"error: (argument \S+: |the following|unrecognized)", en), en
