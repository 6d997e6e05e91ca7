"""GPU check: everything only a GPU can show, in one command that needs nothing from outside the machine.

First, on a machine with PyPI (here)::

    python benchmarks/gpu/prepare_wheels.py      # wheels of what the GPU image lacks -> benchmarks/gpu/wheels/

Then, on the GPU machine (the device tool: ``carry: ["benchmarks/gpu/wheels"]``; results in ``$OUT``)::

    python3 benchmarks/gpu_check.py --quick      # <= 5 minutes on an H200; without --quick <= 9 minutes

It installs the wheels offline into a scratch folder (``pip install --no-index --no-deps --target``; the
image's torch is not touched), puts the repository on the path, and runs each section in its own process
with its own time limit, so a crash or a device fault in one section is that section's failure and no
other's. Output, under ``--out`` (default ``$OUT``, else ``benchmarks/gpu/out``): ``summary.txt`` (one
verdict line per section, rewritten after each), ``details.txt`` (the summary, then every section's full
output in order),
``results.json``, and the traces ``gpu_cudagraph.jsonl`` and ``gpu_throughput.jsonl`` (to ship as
``traces/gpu_*.jsonl``). The exit status is 0 only if no section failed.

``--cpu-dry-run`` runs the same flow here: a fresh virtual environment that sees the installed packages
except the ones the GPU image lacks, the same offline install from the wheel folder, and every section in
its CPU stand-in (tiny shapes, the Triton interpreter); sections that need CUDA say SKIP.

This file uses only the standard library: it runs before anything is installed.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import sysconfig
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WHEELS = ROOT / "benchmarks" / "gpu" / "wheels"
RUNNER = ROOT / "benchmarks" / "gpu" / "run_section.py"
# What the package imports at run time that the GPU image lacks (ipywidgets is only for the notebook Player).
MISSING_ON_IMAGE = ("msgspec", "structlog")
# Packages the GPU image does not have, hidden from the dry run's environment.
HIDDEN_IN_DRY_RUN = ("msgspec", "structlog", "ipywidgets", "widgetsnbextension", "flash_attn", "nanovllm_teach",
                     "__editable__")
# (name, seconds in --quick, seconds in the full run); the CPU stand-in uses the full limits.
SECTIONS = [("checkpoint", 30, 40), ("kernels", 35, 45), ("greedy", 35, 60), ("graphs", 70, 100),
            ("memory", 40, 60), ("tp", 10, 30), ("flash", 10, 30), ("throughput", 55, 160)]
# The whole run ends by then, start-up included; a section that would not fit is reported NOT RUN.
DEADLINE = {"quick": 290, "full": 530, "cpu": 900}


@dataclass
class Result:
    name: str
    status: str    # PASS, FAIL, SKIP or NOT RUN
    seconds: float
    line: str


def install(python: str, site: Path, log: list[str]) -> dict[str, str]:
    """Install the missing packages from the wheel folder into ``site``, offline; the environment to run in."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(ROOT)]), "PIP_CONFIG_FILE": os.devnull}
    probe = subprocess.run([python, "-c", "import sys\nfor n in sys.argv[1:]:\n  __import__(n)", *MISSING_ON_IMAGE],
                           env=env, capture_output=True, text=True)
    if probe.returncode != 0:
        if not any(WHEELS.glob("*.whl")):
            raise SystemExit(f"gpu_check: no wheels in {WHEELS.relative_to(ROOT)}: run "
                             "`python benchmarks/gpu/prepare_wheels.py` where PyPI is reachable, and carry that folder")
        cmd = [sys.executable, "-m", "pip", "install", "--no-index", "--no-deps", "--no-cache-dir", "--no-compile",
               "--disable-pip-version-check", "--quiet", "--target", str(site), "--find-links", str(WHEELS),
               *MISSING_ON_IMAGE]
        log.append("$ " + " ".join(cmd))
        done = subprocess.run(cmd, env=env, capture_output=True, text=True)
        log.append(done.stdout + done.stderr)
        if done.returncode != 0:
            raise SystemExit(f"gpu_check: the offline install failed:\n{done.stdout}{done.stderr}")
    check = subprocess.run([python, "-c", "import msgspec, structlog, nanovllm_teach as p; "
                            "print('msgspec', msgspec.__version__, msgspec.__file__); "
                            "print('structlog', structlog.__version__, structlog.__file__); "
                            "print('nanovllm_teach from', p.__file__)"], env=env, capture_output=True, text=True)
    log.append(check.stdout + check.stderr)
    if check.returncode != 0:
        raise SystemExit(f"gpu_check: nanovllm_teach does not import after the install:\n{check.stderr}")
    return env


def dry_run_python(scratch: Path) -> str:
    """A fresh virtual environment seeing this interpreter's packages except the ones the GPU image lacks."""
    venv = scratch / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    view = scratch / "image-site-packages"
    view.mkdir()
    for site in {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}:
        for entry in Path(site).iterdir():
            if not entry.name.startswith(HIDDEN_IN_DRY_RUN) and not (view / entry.name).exists():
                (view / entry.name).symlink_to(entry)
    python = venv / "bin" / "python"
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             check=True, capture_output=True, text=True).stdout.strip()
    Path(purelib, "gpu_image.pth").write_text(str(view) + "\n")  # a plain path: .pth files inside are not run
    return str(python)


def run_section(name: str, limit: float, mode: str, python: str, env: dict[str, str], work: Path,
                out: Path) -> tuple[Result, str]:
    start = time.perf_counter()
    cmd = [python, str(RUNNER), name, mode, str(work), str(out), str(time.time() + limit)]
    try:
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=limit, cwd=ROOT)
        output, rc = done.stdout + done.stderr, done.returncode
    except subprocess.TimeoutExpired as exc:
        output = (exc.stdout or b"").decode(errors="replace") + (exc.stderr or b"").decode(errors="replace")
        return Result(name, "FAIL", time.perf_counter() - start, f"timed out after {limit:.0f} s"), output
    seconds = time.perf_counter() - start
    verdicts = [line for line in output.splitlines() if line.startswith("VERDICT: ")]
    if not verdicts:
        return Result(name, "FAIL", seconds, f"crashed (exit status {rc}) before its verdict"), output
    status, _, line = verdicts[-1].removeprefix("VERDICT: ").partition(" ")
    if rc != 0 and status != "FAIL":
        status, line = "FAIL", f"exit status {rc} after: {line}"
    return Result(name, status, seconds, line), output


def write_summary(out: Path, header: str, results: list[Result], finished: bool) -> None:
    lines = [header, ""] + [f"{r.status:<8} {r.name:<11} {r.seconds:6.1f} s  {r.line}" for r in results]
    failed = [r.name for r in results if r.status in ("FAIL", "NOT RUN")]
    lines += ["", f"failed sections: {', '.join(failed) or 'none'}" if finished else "(still running)"]
    (out / "summary.txt").write_text("\n".join(lines) + "\n")
    (out / "results.json").write_text(json.dumps([asdict(r) for r in results], indent=1) + "\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="the reduced check (<= 5 minutes on an H200)")
    ap.add_argument("--cpu-dry-run", action="store_true", help="the same flow on a CPU, CUDA sections skipped")
    ap.add_argument("--out", type=Path, default=None, help="output folder (default: $OUT, else benchmarks/gpu/out)")
    ap.add_argument("--only", default=None, help="comma-separated sections to run (default: all)")
    args = ap.parse_args(argv)
    mode = "cpu" if args.cpu_dry_run else ("quick" if args.quick else "full")
    names = [name for name, _, _ in SECTIONS]
    only = names if args.only is None else args.only.split(",")
    if unknown := sorted(set(only) - set(names)):
        ap.error(f"unknown sections {unknown}; choose from {','.join(names)}")
    out = args.out or Path(os.environ.get("OUT") or ROOT / "benchmarks" / "gpu" / "out")
    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="nanovllm_gpu_check_") as tmp:
        scratch = Path(tmp)
        log: list[str] = []
        python = dry_run_python(scratch) if mode == "cpu" else sys.executable
        env = install(python, scratch / "site", log)
        if mode == "cpu":
            env["TRITON_INTERPRET"] = "1"  # the kernels' CPU stand-in
        else:
            env.pop("TRITON_INTERPRET", None)  # compiled kernels: interpreted ones are not what a GPU runs
        env.update(HF_HUB_OFFLINE="1", PYTHONUNBUFFERED="1")
        header = (f"gpu_check {mode} on {platform.node()} (python {platform.python_version()}), sections in their "
                  f"own processes; install:\n" + "\n".join(s.strip() for s in log if s.strip()))
        details = out / "details.txt"
        details.write_text(header + "\n")
        results: list[Result] = []
        for name, quick_s, full_s in SECTIONS:
            if name not in only:
                continue
            left = DEADLINE[mode] - (time.perf_counter() - started)
            limit = min(quick_s if mode == "quick" else full_s, left)
            if limit < 5:
                result, output = Result(name, "NOT RUN", 0.0, f"no time left in the {DEADLINE[mode]} s budget"), ""
            else:
                result, output = run_section(name, limit, mode, python, env, scratch, out)
            results.append(result)
            print(f"{result.status:<8} {name:<11} {result.seconds:6.1f} s  {result.line}", flush=True)
            with open(details, "a") as f:
                f.write(f"\n===== {name}: {result.status} ({result.seconds:.1f} s) =====\n{output}")
            write_summary(out, header, results, finished=False)
        write_summary(out, header, results, finished=True)
        # The details open with the summary too: one file says everything.
        details.write_text((out / "summary.txt").read_text() + details.read_text().removeprefix(header + "\n"))
    failed = [r.name for r in results if r.status in ("FAIL", "NOT RUN")]
    print(f"done in {time.perf_counter() - started:.0f} s; failed sections: {', '.join(failed) or 'none'}; "
          f"output in {out}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
