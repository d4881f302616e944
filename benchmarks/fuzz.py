"""A fuzzing campaign against every reader and the CLI: ``python benchmarks/fuzz.py SEED N``.

N mutants of the real fixtures (``tests/mutants.py``: byte flips, cuts, garbage, extreme numbers, reordered
steps, long lines, JSON-tree changes, TFRecord and ``.wandb`` records re-framed with valid CRCs) are each run as
``forensics analyze`` (or ``export``) in a process of its own, with a time limit and a memory limit, and every run
is classified:

* ``ok``: exit 0, nothing on stderr; ``refused``: exit 2 and one stderr line ``forensics: error: ...``;
* failures: ``internal`` (exit 1, "forensics: internal error"), ``traceback`` (a Python traceback or a Rust panic
  on stderr), ``hang`` (over the time limit), ``memory`` (MemoryError or a failed allocation under the memory
  limit), ``crash`` (killed by a signal), ``wrote-input`` (a file in the input folder created or changed),
  ``noisy`` (exit 0 with something on stderr: a library warning), ``bad-refusal`` (exit 2 without exactly one
  ``forensics: error:`` line), ``other`` (any other exit code).

It prints a table of outcomes by reader (the reader of the fixture that was mutated) and writes each failing
input, with ``info.txt`` (outcome, command, mutators, stderr) into ``--out`` (default: ``fuzz-failures/`` in the
current directory), one folder per failure: ``<outcome>/<reader>-<index>/``. The first failure of each kind
(outcome and first stderr line, paths and numbers left out) is also shrunk (chunks of the mutated file removed
while the failure stays the same) into ``<outcome>/<reader>-<index>/minimal/``. Exit code: 0 when nothing failed,
1 otherwise. The same SEED and N give the same mutants.

Speed: mutants are forked from this process once it has imported everything a run imports (learned from a
probe run in a child) and loaded the compiled PELT loop, so a run costs its analysis only (~0.1-0.3 s). Polars
is never used in this process: its thread pool does not survive a fork.

    python benchmarks/fuzz.py 1 300                  # a shake-out, ~1 minute on 2 cores
    python benchmarks/fuzz.py 2026 5000 --jobs 2     # the campaign before a release, ~15 minutes
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import random
import re
import resource
import shutil
import signal
import sys
import tempfile
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

import mutants  # noqa: E402  (tests/mutants.py)

OUTCOMES = ("ok", "refused", "internal", "traceback", "hang", "memory", "crash", "wrote-input", "noisy",
            "bad-refusal", "other")
FAILURES = OUTCOMES[2:]


@dataclass
class Case:
    """One mutant: what it came from, how it is run, and (once run) what happened."""

    index: int
    seed: mutants.Seed
    data: bytes
    mutators: list[str]
    alone: bool
    command: list[str]  # the CLI's argv after "forensics", {input} and {out} filled in at run time
    outcome: str = ""
    code: int | None = None
    stderr: str = ""
    seconds: float = 0.0
    changed: list[str] = field(default_factory=list)


def plan(seed: int, index: int) -> Case:
    """The mutant number ``index`` of campaign ``seed`` (readers in turn, so each gets its share)."""
    rng = random.Random(f"{seed}:{index}")
    readers = sorted({s.reader for s in mutants.SEEDS})
    reader = readers[index % len(readers)]
    fixture = rng.choice([s for s in mutants.SEEDS if s.reader == reader])
    data, names = mutants.mutate(mutants.seed_bytes(fixture), fixture.kind, rng, big=True)
    alone = bool(fixture.target) and rng.random() < 0.2
    r = rng.random()
    if r < 0.08:
        command = ["analyze", "{input}", "-o", "{out}/report.md"]  # with plots
    elif r < 0.40:
        command = ["analyze", "{input}", "-o", "{out}/report.md", "--no-plots"]
    elif r < 0.70:
        command = ["analyze", "{input}", "-o", "{out}/report.json", "--format", "json"]
    elif r < 0.85:
        command = ["analyze", "{input}", "--format", "json"]  # to stdout
    elif r < 0.95:
        command = ["analyze", "{input}"]
    else:
        command = ["export", "{input}", "-o", "{out}/frames"]
    return Case(index, fixture, data, names, alone, command)


# --------------------------------------------------------------------------------------------- the forks ----


def _probe(write_fd: int) -> None:
    """In a child: run the CLI on several fixtures (every output kind), then report the modules it imported."""
    import forensics.cli

    out = tempfile.mkdtemp(prefix="forensics-fuzz-probe-")
    inputs = [str(ROOT / s.root) for s in mutants.SEEDS if s.root and not s.generated]
    with open(os.devnull, "w") as sink, contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
        for k, path in enumerate(dict.fromkeys(inputs)):
            args = (["analyze", path, "-o", f"{out}/r{k}.md"] if k < 3 else
                    ["analyze", path, "-o", f"{out}/r{k}.json", "--format", "json", "--no-plots"])
            sys.argv = ["forensics", *args]
            with contextlib.suppress(SystemExit):
                forensics.cli.main()
        sys.argv = ["forensics", "export", inputs[0], "-o", f"{out}/frames"]
        with contextlib.suppress(SystemExit):
            forensics.cli.main()
    os.write(write_fd, "\n".join(sorted(sys.modules)).encode())
    shutil.rmtree(out, ignore_errors=True)


def warm_up() -> None:
    """Import here what a run imports (without using polars here) and load the compiled PELT loop, so each forked
    run starts warm."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(read_fd)
            _probe(write_fd)
        finally:
            os._exit(0)
    os.close(write_fd)
    chunks = []
    while chunk := os.read(read_fd, 1 << 16):
        chunks.append(chunk)
    os.close(read_fd)
    os.waitpid(pid, 0)
    for name in b"".join(chunks).decode().split():
        if not name.startswith("__"):
            with contextlib.suppress(Exception):
                importlib.import_module(name)
    import numpy as np

    from forensics.pelt_kernel import pelt_loop

    sums = np.cumsum(np.r_[0.0, np.linspace(0.0, 1.0, 40)])
    for normal in (False, True):
        pelt_loop(sums, np.cumsum(np.r_[0.0, np.linspace(0.0, 1.0, 40) ** 2]), 1.0, 2, normal)


def _vm_bytes() -> int:
    with contextlib.suppress(OSError, ValueError, StopIteration):
        line = next(x for x in Path("/proc/self/status").read_text().splitlines() if x.startswith("VmSize:"))
        return int(line.split()[1]) * 1024
    return 0


def _child(argv: list[str], stderr_path: Path, workdir: Path, limit: int) -> None:
    """In the forked child: limits, stdout to /dev/null, stderr (fd 2, so native panics too) to a file, then the
    CLI's own entry point; never returns."""
    code = 70
    try:
        if limit:
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        os.chdir(workdir)  # a relative write would land in the output folder, never in the input
        null = os.open(os.devnull, os.O_WRONLY)
        err = os.open(stderr_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(null, 1)
        os.dup2(err, 2)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        import forensics.cli

        sys.argv = ["forensics", *argv]
        try:
            forensics.cli.main()
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:  # a failure outside main(): shown as a traceback on stderr
        import traceback

        with contextlib.suppress(Exception):
            traceback.print_exc()
        code = 71
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def _snapshot(path: Path) -> dict[str, tuple[int, int]]:
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*"))
    return {str(p): (p.stat().st_size, p.stat().st_mtime_ns) if p.is_file() else (-1, 0) for p in files}


def _input_path(case: Case, workdir: Path) -> tuple[Path, Path]:
    """Write the case's input under ``workdir/in``; the path to analyze and the folder whose tree is watched."""
    target = mutants.materialize(case.seed, case.data, workdir / "in", alone=case.alone)
    return target, workdir / "in"


def classify(code: int | None, signum: int | None, timed_out: bool, stderr: str, changed: list[str]) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    if timed_out:
        return "hang"
    if "MemoryError" in stderr or "memory allocation of" in stderr or "Cannot allocate memory" in stderr:
        return "memory"
    if "Traceback (most recent call last)" in stderr or "panicked at" in stderr or "RUST_BACKTRACE" in stderr:
        return "traceback"
    if signum is not None:
        return "crash"
    if changed:
        return "wrote-input"
    if code == 1 and "internal error" in stderr:
        return "internal"
    if code == 0:
        return "ok" if not lines else "noisy"
    if code == 2:
        return "refused" if len(lines) == 1 and lines[0].startswith("forensics: error: ") else "bad-refusal"
    return "other"


def signature(case: Case) -> str:
    """What makes two failures the same kind: outcome, reader, the exception type or first stderr line with paths
    and numbers left out."""
    first = next((line for line in case.stderr.splitlines() if line.strip()), "")
    exc = re.findall(r"^(\w+(?:Error|Exception|Warning)\b[^\n]{0,0})", case.stderr, re.M)
    said = exc[-1] if exc and case.outcome == "traceback" else first
    said = re.sub(r"'[^']*'|\"[^\"]*\"|/\S+", "<path>", said)
    said = re.sub(r"\d+", "N", said)
    return f"{case.outcome} ({case.seed.reader}): {said[:160]}"


class Runner:
    """Runs cases in forked children, ``jobs`` at a time."""

    def __init__(self, jobs: int, timeout: float, mem_gb: float, work: Path) -> None:
        self.jobs, self.timeout, self.work = jobs, timeout, work
        self.limit = int(_vm_bytes() + mem_gb * (1 << 30)) if mem_gb > 0 else 0

    def run(self, cases: list[Case], done=None) -> None:
        pending = list(cases)
        running: dict[int, tuple[Case, float, Path, Path, dict]] = {}
        while pending or running:
            while pending and len(running) < self.jobs:
                case = pending.pop(0)
                workdir = self.work / f"m{case.index}"
                shutil.rmtree(workdir, ignore_errors=True)
                (workdir / "out").mkdir(parents=True)
                target, watched = _input_path(case, workdir)
                before = _snapshot(watched)
                argv = [a.replace("{input}", str(target)).replace("{out}", str(workdir / "out")) for a in case.command]
                pid = os.fork()
                if pid == 0:
                    _child(argv, workdir / "stderr.txt", workdir / "out", self.limit)
                running[pid] = (case, time.monotonic(), workdir, watched, before)
            pid, status = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                now = time.monotonic()
                for p, (case, start, *_rest) in list(running.items()):
                    if now - start > self.timeout:
                        with contextlib.suppress(ProcessLookupError):
                            os.kill(p, signal.SIGKILL)
                        case.outcome = "hang"
                time.sleep(0.003)
                continue
            case, start, workdir, watched, before = running.pop(pid)
            case.seconds = time.monotonic() - start
            timed_out = case.outcome == "hang"
            signum = os.WTERMSIG(status) if os.WIFSIGNALED(status) else None
            case.code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else None
            case.stderr = (workdir / "stderr.txt").read_text(errors="replace") if (workdir / "stderr.txt").exists() else ""
            if signum is not None and not timed_out:
                case.stderr += f"\n[killed by signal {signal.Signals(signum).name}]"
            after = _snapshot(watched)
            case.changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
            case.outcome = classify(case.code, signum, timed_out, case.stderr, case.changed)
            shutil.rmtree(workdir, ignore_errors=True)
            if done:
                done(case)


def shrink(case: Case, runner: Runner, budget: int = 80) -> Case:
    """A smaller mutant with the same failure signature: chunks of the mutated file removed (halves, quarters, ...,
    then lines), each candidate run like the original."""
    want = signature(case)
    best = case
    tries = 0
    n = 2
    while tries < budget and len(best.data) > 1:
        size = max(1, len(best.data) // n)
        improved = False
        for start in range(0, len(best.data), size):
            if tries >= budget:
                break
            candidate = Case(10_000_000 + tries, best.seed, best.data[:start] + best.data[start + size:],
                             [*best.mutators, *([] if "shrunk" in best.mutators else ["shrunk"])], best.alone, best.command)
            tries += 1
            runner.run([candidate])
            if signature(candidate) == want:
                best, improved = candidate, True
                break
        if not improved:
            if size == 1:
                break
            n = min(len(best.data), n * 2)
    return best


def save(case: Case, folder: Path) -> Path:
    """Write a failing case: its input tree, and ``info.txt``."""
    folder.mkdir(parents=True, exist_ok=True)
    target = mutants.materialize(case.seed, case.data, folder / "input", alone=case.alone)
    argv = [a.replace("{input}", str(target)).replace("{out}", "OUT") for a in case.command]
    (folder / "info.txt").write_text(
        f"outcome: {case.outcome}\nreader: {case.seed.reader}\nfixture: {case.seed.root} {case.seed.target}\n"
        f"mutant: {case.index} mutators: {', '.join(case.mutators)}\nexit code: {case.code}\n"
        f"seconds: {case.seconds:.2f}\nchanged in the input: {case.changed}\n"
        f"reproduce: forensics {' '.join(argv)}\n\nstderr:\n{case.stderr}"
    )
    return target


def table(cases: list[Case]) -> str:
    """Outcomes by reader (rows) and outcome (columns), as a markdown table."""
    counts: dict[str, Counter] = defaultdict(Counter)
    for case in cases:
        counts[case.seed.reader][case.outcome] += 1
    total: Counter = Counter()
    for c in counts.values():
        total.update(c)
    shown = [o for o in OUTCOMES if o in ("ok", "refused", "internal", "traceback", "hang", "memory") or total[o]]
    names = [*sorted(counts), "all"]
    grid = [[counts[r][o] if r != "all" else total[o] for o in shown] for r in names]
    grid = [[*row, sum(row)] for row in grid]
    heads = ["reader", *shown, "total"]
    columns = [names, *zip(*grid, strict=True)]
    widths = [max(len(h), *(len(str(v)) for v in col)) for h, col in zip(heads, columns, strict=True)]

    def line(cells: list) -> str:
        return "| " + " | ".join(str(c).ljust(w) if i == 0 else str(c).rjust(w)
                                 for i, (c, w) in enumerate(zip(cells, widths, strict=True))) + " |"
    rule = "|" + "|".join(("-" * (w + 1) + (":" if i else "-")) if i else "-" * (w + 2) for i, w in enumerate(widths)) + "|"
    return "\n".join([line(heads), rule, *(line([n, *row]) for n, row in zip(names, grid, strict=True))])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("seed", type=int, help="campaign seed (the same seed and N give the same mutants)")
    parser.add_argument("n", type=int, help="number of mutants")
    parser.add_argument("--out", type=Path, default=Path("fuzz-failures"),
                        help="folder for failing inputs (default: fuzz-failures/ in the current directory)")
    parser.add_argument("--jobs", type=int, default=2, help="runs at a time (default 2)")
    parser.add_argument("--timeout", type=float, default=20.0, help="seconds a run may take (default 20)")
    parser.add_argument("--mem-gb", type=float, default=4.0,
                        help="address space a run may add to this process's, GiB (default 4; 0: no limit)")
    parser.add_argument("--no-shrink", action="store_true", help="do not shrink the first failure of each kind")
    args = parser.parse_args()

    started = time.monotonic()
    warm_up()
    work = Path(tempfile.mkdtemp(prefix="forensics-fuzz-"))
    runner = Runner(max(1, args.jobs), args.timeout, args.mem_gb, work)
    print(f"fuzz: seed {args.seed}, {args.n} mutants, {runner.jobs} jobs, {args.timeout:g} s and "
          f"{args.mem_gb:g} GiB per run; warm-up {time.monotonic() - started:.1f} s", flush=True)
    cases: list[Case] = []
    seen: dict[str, Case] = {}
    step = max(1, args.n // 20)

    def done(case: Case) -> None:
        cases.append(case)
        if case.outcome in FAILURES:
            save(case, args.out / case.outcome / f"{case.seed.reader}-{case.index}")
            seen.setdefault(signature(case), case)
        if len(cases) % step == 0:
            bad = sum(c.outcome in FAILURES for c in cases)
            print(f"  {len(cases)}/{args.n} run, {bad} failing, {time.monotonic() - started:.0f} s", flush=True)

    batch = 64  # mutants are made just before they run (a campaign's mutants need not all be in memory)
    for first in range(0, args.n, batch):
        runner.run([plan(args.seed, i) for i in range(first, min(args.n, first + batch))], done)
    elapsed = time.monotonic() - started
    cases.sort(key=lambda c: c.index)
    print()
    print(table(cases))
    slow = max(cases, key=lambda c: c.seconds) if cases else None
    print(f"\n{len(cases)} mutants in {elapsed:.0f} s ({elapsed / max(1, len(cases)):.2f} s each with {runner.jobs} "
          f"jobs); slowest run {slow.seconds:.1f} s (mutant {slow.index}, {slow.seed.name})" if slow else "")
    if seen:
        print(f"\n{len(seen)} kind(s) of failure (first mutant of each; inputs under {args.out}/):")
        for sig, case in sorted(seen.items()):
            count = sum(signature(c) == sig for c in cases)
            where = args.out / case.outcome / f"{case.seed.reader}-{case.index}"
            if not args.no_shrink and case.outcome != "hang":
                small = shrink(case, runner)
                if small is not case:
                    save(small, where / "minimal")
                    where = where / "minimal"
            print(f"- {sig}  [{count}x; {case.seed.reader}; {', '.join(case.mutators)}] {where}")
    shutil.rmtree(work, ignore_errors=True)
    return 1 if seen else 0


if __name__ == "__main__":
    sys.exit(main())
