"""The notebooks in two languages from one source each: ``notebooks/src/01_quickstart.md`` builds
``notebooks/en/01_quickstart.ipynb`` and ``notebooks/zh/01_quickstart.ipynb``, and so on for every source.

A source is a Jupytext Markdown notebook. Code cells are fenced ```` ```python ```` blocks, shared by both
languages; every Markdown cell is written twice, English then Chinese, each in a region tagged with its
language::

    <!-- #region lang="en" -->
    ## 2 · The prefill step
    <!-- #endregion -->

    <!-- #region lang="zh" -->
    ## 2 · 预填充（prefill）步
    <!-- #endregion -->

The build gives each language its Markdown cells and every code cell, after a first cell that sets the
notebook's language (``set_lang``: figures, logs and messages follow it). The code is the same in both.
The built notebooks are committed, without outputs, so a learner opens them with no build step;
``python -m nanovllm_teach.i18n.notebooks`` rebuilds them, ``--check`` says what is stale or untranslated
(exit 1), which the test suite runs too. A source is checked before anything is written: every Markdown
cell has a language, every English cell is followed by its Chinese one, a Chinese cell is Chinese (not a
copy), and each pair keeps to the glossary (``i18n/glossary.py``). ``english_runs`` finds English prose left in a
Chinese text; the notebook tests read the Chinese notebooks' outputs with it.

Needs ``jupytext`` and ``nbformat`` (the ``test`` extra). Emits no events.
"""

from __future__ import annotations

import argparse
import hashlib
import re
import sys
from pathlib import Path

import jupytext
import nbformat

from nanovllm_teach.i18n import LANGS
from nanovllm_teach.i18n.glossary import TERMS

ROOT = Path(__file__).resolve().parents[2] / "notebooks"
_CJK = re.compile(r"[\u4e00-\u9fff]")
# Code blocks and spans (Markdown's `x`, reStructuredText's ``x``), and in one-line texts the names a
# sentence quotes without them (a dotted name such as scheduler.running, a literal such as 'decode'): names,
# not prose. A number (3.1) is not a dotted name.
_CODE = re.compile(r"```.*?```|``.*?``|`[^`\n]*`|\b[^\W\d]\w*(?:\.\w+)+\b|(?<![\w.])\.[^\W\d]\w*|'\w+'", re.S)
_BRACKETED = r"\s*[（(][^）)]*?{}[^）)]*[）)]"  # the English term inside the brackets right after
# What Chinese prose may hold in English and still be Chinese: the glossary's terms (English and Chinese),
# proper names, units, and the few words the Chinese of the field keeps as they are (the glossary's
# Chinese terms use some: 首 token 延迟). Such words neither count towards an English run nor break one.
_KEPT_IN_ENGLISH = frozenset("""
    token tokens prompt prompts batch batches step steps trace traces kernel kernels rank ranks eager graph graphs
    notebook notebooks head heads query key value logits softmax argmax checkpoint byte bytes float int
    ms s us ns µs min h x
    """.split())
_PROPER_NAMES = frozenset("""
    Qwen Triton PyTorch Transformers Hugging Face Python Jupyter Linux NVIDIA Intel AMD EPYC Poisson Gantt
    Perfetto Chrome Chromium Hopper Ampere Ada Blackwell Grace Llama Mistral DeepSeek OpenAI vLLM Ray
    """.split())
_DATA = re.compile(r"'[^'\n]*'|\"[^\"\n]*\"|\{[^{}\n]*\}")
_WORD = re.compile(r"[A-Za-z]+(?:'[a-z]+)?")
_NUMBER = re.compile(r"[(~≈+-]?[\d.,]*\d[\d.,]*(?:%|x|×)?[),;:]?")
_RUN_LENGTH = 3
_TERM = "\x00"  # where a glossary term stood: neither English prose nor a break in it


def english_runs(text: str) -> list[str]:
    """The runs of three or more English words in a row in ``text`` that are prose: not code (as
    ``_CODE`` reads it, and words joined to digits, underscores, dots or slashes), not a glossary term, not a
    proper name or an acronym (a word with two capitals: GPU, TTFT, OpenAI). Data is not prose either: a quoted
    string (a prompt, the model's answer) or a printed dict (an event's recorded stats). Words are in a row when
    one space apart: the columns of a table, two spaces or more apart, are labels. Chinese text has no runs."""
    prose = _DATA.sub(" ; ", _CODE.sub(" ; ", text))
    for form in sorted({form for term in TERMS for form in term.en}, key=len, reverse=True):
        prose = re.sub(rf"(?<![\w-]){re.escape(form)}(?![\w-])", _TERM, prose, flags=re.IGNORECASE)
    runs: list[str] = []
    run: list[str] = []
    for piece in re.split(r"(\s{2,}|\t)|(?<=\S) (?=\S)", prose.strip()):
        if piece is None:
            continue
        bare = piece.strip().strip("()").rstrip(",.;:!?)")
        if _WORD.fullmatch(bare):
            if not _is_name(bare):
                run.append(bare)
        elif not (bare == _TERM or _NUMBER.fullmatch(bare)):  # a term or a number is read in either language
            run = _ended(run, runs)
        last = piece.rstrip(")")[-1:]
        if piece.isspace() or (last and last in ",.;:!?"):  # a table's column or a clause ends
            run = _ended(run, runs)
    _ended(run, runs)
    return runs


def _is_name(word: str) -> bool:
    """A proper name, an acronym or a word the Chinese keeps in English: no part of an English sentence."""
    return word.lower() in _KEPT_IN_ENGLISH or word in _PROPER_NAMES or sum(map(str.isupper, word)) >= 2


def _ended(run: list[str], runs: list[str]) -> list[str]:
    if len(run) >= _RUN_LENGTH:
        runs.append(" ".join(run))
    return []


def language_cell(lang: str) -> nbformat.NotebookNode:
    return nbformat.v4.new_code_cell(
        f"# This notebook's language (en, zh): its figures, logs and messages follow it, and so do the lines\n"
        f"# the notebook prints itself (tell(english, chinese)) and its plots' labels (say(Text(en=..., zh=...))).\n"
        f"from nanovllm_teach.i18n import Text, say, set_lang, tell\n\nset_lang({lang!r})",
        metadata={"tags": ["parameters"]})


def problems_in(source: nbformat.NotebookNode, name: str) -> list[str]:
    """What keeps ``source`` from being built: a cell without its translation, a copy, a glossary slip."""
    problems: list[str] = []
    cells = source.cells
    first_use: set[str] = set()
    for i, cell in enumerate(cells):
        if cell.cell_type != "markdown":
            continue
        lang = cell.metadata.get("lang")
        where = f"{name}, Markdown cell {i + 1}"
        if lang not in LANGS:
            problems.append(f"{where} has no language (a region tagged lang=\"en\" or lang=\"zh\")")
        elif lang == "en":
            partner = cells[i + 1] if i + 1 < len(cells) else None
            if partner is None or partner.cell_type != "markdown" or partner.metadata.get("lang") != "zh":
                problems.append(f"{where} (English) is not followed by its Chinese cell")
            else:
                problems += pair_problems(cell.source, partner.source, where, first_use)
        elif i == 0 or cells[i - 1].metadata.get("lang") != "en":
            problems.append(f"{where} (Chinese) does not follow an English cell")
    return problems


def pair_problems(en: str, zh: str, where: str, first_use: set[str]) -> list[str]:
    """What is wrong with a pair of texts, English ``en`` and its Chinese ``zh``, held to the glossary;
    ``first_use``: the terms already met in the same document (updated)."""
    problems = []
    prose_en, prose_zh = _CODE.sub(" ", en), _CODE.sub(" ", zh)
    if _CJK.search(en):
        problems.append(f"{where}: the English cell has Chinese in it")
    if prose_en.strip() and not _CJK.search(prose_zh):
        problems.append(f"{where}: the Chinese cell is not in Chinese")
    for term in TERMS:
        if term.in_english(prose_en) and term.zh not in zh:
            problems.append(f"{where}: the English says {term.name!r}, the Chinese lacks the glossary's {term.zh!r}")
        for avoided in term.avoid:
            if avoided in prose_zh:
                problems.append(f"{where}: {avoided!r} is not the glossary's term; write {term.zh!r}")
        if term.zh in prose_zh and term.name not in first_use and term.zh.lower() != term.name:
            first_use.add(term.name)
            forms = "|".join(re.escape(form) for form in term.en)
            if not re.search(re.escape(term.zh) + _BRACKETED.format(f"(?:{forms})"), prose_zh, re.IGNORECASE):
                problems.append(f"{where}: the first {term.zh!r} of the notebook needs the English term in brackets: "
                                f"{term.zh}（{term.name}）")
    return problems


def build(path: Path) -> dict[str, nbformat.NotebookNode]:
    """The notebook of each language built from the source at ``path`` (ValueError listing its problems)."""
    source = jupytext.read(path)
    problems = problems_in(source, path.name)
    if problems:
        raise ValueError("\n".join(problems))
    built = {}
    for lang in LANGS:
        nb = nbformat.v4.new_notebook(metadata={
            "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
            "language_info": {"name": "python"}, "nanovllm_teach": {"lang": lang, "source": f"src/{path.name}"}})
        cells = [language_cell(lang)] + [c for c in source.cells if c.cell_type == "code"
                                         or c.metadata.get("lang") == lang]
        for k, cell in enumerate(cells):
            cell = nbformat.from_dict(dict(cell))
            cell.metadata = {key: value for key, value in cell.metadata.items() if key != "lang"}
            # Ids from the place, not at random: a rebuild of an unchanged source is byte for byte the same.
            cell.id = hashlib.sha1(f"{path.stem}/{lang}/{k}".encode()).hexdigest()[:12]
            if cell.cell_type == "code":
                cell.outputs, cell.execution_count = [], None
            nb.cells.append(cell)
        built[lang] = nb
    return built


def targets(root: Path, source: Path) -> dict[str, Path]:
    return {lang: root / lang / f"{source.stem}.ipynb" for lang in LANGS}


def sources(root: Path = ROOT, names: list[str] | None = None) -> list[Path]:
    """The sources under ``root`` (only those whose name starts with one of ``names``, if given)."""
    return sorted(p for p in (root / "src").glob("*.md") if not names or any(p.stem.startswith(n) for n in names))


def stale(root: Path = ROOT, names: list[str] | None = None) -> list[str]:
    """What is out of date under ``root``: problems in a source, a built notebook missing or not what its
    source builds, a built notebook without a source (``names``: only these sources, no orphan check)."""
    found: list[str] = []
    expected: set[Path] = set()
    for source in sources(root, names):
        try:
            built = build(source)
        except ValueError as error:
            found.append(str(error))
            continue
        for lang, target in targets(root, source).items():
            expected.add(target)
            if not target.is_file() or target.read_text(encoding="utf-8") != nbformat.writes(built[lang]) + "\n":
                found.append(f"{target.relative_to(root.parent)} is stale: run python -m nanovllm_teach.i18n.notebooks")
    for lang in LANGS if not names else ():
        for orphan in sorted(set((root / lang).glob("*.ipynb")) - expected):
            found.append(f"{orphan.relative_to(root.parent)} has no source in {root.name}/src/")
    return found


def write_all(root: Path = ROOT, names: list[str] | None = None) -> list[Path]:
    written = []
    for source in sources(root, names):
        for lang, nb in build(source).items():
            target = targets(root, source)[lang]
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(nbformat.writes(nb) + "\n", encoding="utf-8")
            written.append(target)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="build the English and Chinese notebooks from notebooks/src/",
                                     allow_abbrev=False)
    parser.add_argument("--check", action="store_true", help="only say what is stale or untranslated (exit 1)")
    parser.add_argument("--root", type=Path, default=ROOT, help="the notebooks folder (default: %(default)s)")
    parser.add_argument("names", nargs="*", help="only the sources whose name starts so (e.g. 05)")
    args = parser.parse_args(argv)
    if args.check:
        found = stale(args.root, args.names)
        count = len(sources(args.root, args.names))
        print("\n".join(found) if found else f"{count} sources, every notebook up to date")
        return 1 if found else 0
    try:
        written = write_all(args.root, args.names)
    except ValueError as error:
        print(error, file=sys.stderr)
        return 1
    print(f"built {len(written)} notebooks from {len(sources(args.root))} sources")
    return 0


if __name__ == "__main__":
    sys.exit(main())
