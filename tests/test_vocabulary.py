"""One vocabulary (issue 17, §2): product code compares an anomaly's kind, an attempt's end reason and a run's outcome
with the :mod:`forensics.findings` enums and their named sets, and an event's kind with the ``EV_*`` constants of
:mod:`parsers.schema`, never with a loose string that spells one; the evaluation harness (truths, scores) is on
:class:`~forensics.findings.Kind` too."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from conftest import ROOT

from forensics.findings import EndReason, Kind, Outcome
from parsers import schema

PACKAGES = ("forensics", "parsers", "reports")
FIELDS = {"kind", "end_reason", "outcome"}
EVENT_KINDS = {v for k, v in vars(schema).items() if k.startswith("EV_") and isinstance(v, str)}
VALUES = {str(m) for enum in (Kind, EndReason, Outcome) for m in enum} | EVENT_KINDS


def _field(node: ast.expr) -> str | None:
    """``x.kind``, ``x.end_reason``, ``x.outcome`` (or their ``.value``), or a frame's ``pl.col("kind")`` (and so
    on): the field compared, else None."""
    if isinstance(node, ast.Attribute) and node.attr == "value":
        node = node.value
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "col" and node.args:
        named = node.args[0]
        return named.value if isinstance(named, ast.Constant) and named.value in FIELDS else None
    return node.attr if isinstance(node, ast.Attribute) and node.attr in FIELDS else None


def _members(node: ast.expr) -> list[str]:
    """The string literals in ``node`` (one, or a tuple/list/set of them) that are the value of an enum member."""
    items = node.elts if isinstance(node, ast.Tuple | ast.List | ast.Set) else [node]
    return [i.value for i in items if isinstance(i, ast.Constant) and isinstance(i.value, str) and i.value in VALUES]


def loose_comparisons(source: str) -> list[tuple[int, str, str]]:
    """(line, field, literal) for every ``==``/``!=``/``in``/``not in`` between a vocabulary field and a member value,
    and every ``.filter(field="literal")``.

    >>> loose_comparisons("if a.kind == 'nan' or b.end_reason.value in ('exited', 'x') or c.name == 'nan': pass")
    [(1, 'end_reason', 'exited'), (1, 'kind', 'nan')]
    >>> loose_comparisons("if a.kind == Kind.NAN or 'nan' != a.outcome: pass")
    [(1, 'outcome', 'nan')]
    >>> loose_comparisons("f.filter(pl.col('kind') == 'checkpoint_load')\\nf.filter(outcome='unreadable', x='nan')")
    [(1, 'kind', 'checkpoint_load'), (2, 'outcome', 'unreadable')]
    """
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "filter":
            found += [(node.lineno, k.arg, literal) for k in node.keywords if k.arg in FIELDS
                      for literal in _members(k.value)]
        if not isinstance(node, ast.Compare):
            continue
        sides = [node.left, *node.comparators]
        for op, left, right in zip(node.ops, sides, sides[1:], strict=False):
            if not isinstance(op, ast.Eq | ast.NotEq | ast.In | ast.NotIn):
                continue
            for one, other in ((left, right), (right, left)):
                name = _field(one)
                if name is not None:
                    found += [(node.lineno, name, literal) for literal in _members(other)]
    return sorted(found)


def test_no_loose_vocabulary_strings_in_product_code() -> None:
    loose = [f"{path.relative_to(ROOT)}:{line}: .{name} compared with {literal!r}"
             for package in PACKAGES for path in sorted((ROOT / package).rglob("*.py"))
             for line, name, literal in loose_comparisons(path.read_text(encoding="utf-8"))]
    assert not loose, "use the enums of forensics.findings (or a named set beside them):\n" + "\n".join(loose)


def test_the_scan_sees_the_product_code() -> None:
    files = [p for package in PACKAGES for p in (ROOT / package).rglob("*.py")]
    assert len(files) > 50 and all(Path(p).is_file() for p in files)


def test_the_evaluation_harness_speaks_kind() -> None:
    from forensics.evaluation import KINDS, Score, Truth, evaluate, generate, score
    from forensics.evaluation.metrics import RELATED

    assert all(type(k) is Kind for k in KINDS)
    assert all(type(k) is Kind and all(type(r) is Kind for r in related) for k, related in RELATED.items())
    assert set(RELATED) == set(KINDS)
    assert Truth("nan", 10, 10).kind is Kind.NAN  # a plain string is coerced, as Anomaly does
    with pytest.raises(ValueError, match="'nans' is not a valid Kind"):
        Truth("nans", 10, 10)
    truths = [t for scenario in ("fp16_collapse", "spikes") for t in generate(scenario, 0, 10, noise="t3").truths]
    assert truths and all(type(t.kind) is Kind for t in truths)
    with pytest.raises(ValueError, match="'loss_spikes' is not a valid Kind"):
        score("loss_spikes", [], truths, margin=5)
    assert type(score("nan", [], truths, margin=5).kind) is Kind
    [row] = evaluate(["spikes"], seeds=[0], intervals=[10], noise="t3")
    assert all(type(k) is Kind and type(s.kind) is Kind for k, s in row.scores.items())
    assert isinstance(row.scores[Kind.LOSS_SPIKE], Score)


# string methods that read prose out of a log line
_TEXT_METHODS = {"contains", "extract", "extract_all", "extract_groups", "replace", "replace_all", "starts_with",
                 "ends_with", "count_matches", "find", "split"}


def text_reads(source: str) -> list[tuple[int, str]]:
    """(line, function) of every ``.str.<method>(...)`` applied to an event's ``text`` (``pl.col("text")``,
    ``frame["text"]``) or to a column derived from it (``same``).

    >>> text_reads("def f(e):\\n    return e.filter(pl.col('text').str.contains('Skipping step'))")
    [(2, 'f')]
    >>> text_reads("def g(e):\\n    return e.filter(pl.col('kind') == s.EV_OVERFLOW, pl.col('tag').str.contains('x'))")
    []
    """
    tree = ast.parse(source)
    owner = {}
    for fn in ast.walk(tree):
        if isinstance(fn, ast.FunctionDef):
            for node in ast.walk(fn):
                owner.setdefault(id(node), fn.name)
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _TEXT_METHODS
                and isinstance(node.func.value, ast.Attribute) and node.func.value.attr == "str"):
            continue
        receiver = ast.unparse(node.func.value.value)
        if any(name in receiver for name in ("'text'", '"text"', "'same'", '"same"')):
            found.append((node.lineno, owner.get(id(node), "<module>")))
    return sorted(set(found))


def test_forensics_reads_no_prose_from_log_lines() -> None:
    """Issue 17: the reader that sees a line gives it a typed event kind (parsers.schema); forensics/ works on kinds
    and fields, not on the words of the line ("Skipping step", "not loading optimizer", rank prefixes: all moved to
    parsers; a sweep job's number and overrides, the iteration an fp16 overflow line names: the parsers' too)."""
    reads = sorted(f"{path.relative_to(ROOT)}:{line} in {fn}" for path in sorted((ROOT / "forensics").rglob("*.py"))
                   for line, fn in text_reads(path.read_text(encoding="utf-8")))
    assert not reads, "let the parser give these lines an event kind (parsers/schema.py):\n" + "\n".join(reads)


def test_the_parsers_give_a_sweep_job_and_an_overflows_iteration_as_fields() -> None:
    """What forensics.endings read out of lines' text, the parsers give: Tarun-AK/scaling's Hydra sweep
    ("[HYDRA] \\t#3 : hidden_dim=1028", output.log L6/L14/L20) is a sweep_job event of value 3 whose text is its
    overrides; DeepSpeed #697's "Grad overflow on iteration 8" (L7, L9, L13: three ranks' copies) is an overflow with
    an overflow_iteration event of value 8 beside it; the skip line after them (L14) names none."""
    import polars as pl

    import parsers

    real = ROOT / "tests" / "fixtures" / "real"
    jobs = parsers.load_run(real / "wandb" / "Tarun-AK__scaling").events.filter(pl.col("kind") == schema.EV_SWEEP_JOB)
    assert jobs.sort("line").select("line", "value", "text").rows() == [
        (6, 1.0, "hidden_dim=256"), (14, 2.0, "hidden_dim=512"), (20, 3.0, "hidden_dim=1028")]
    events = parsers.load_run(real / "console_errors" / "deepspeed_issue697_overflow_copies_excerpt.txt").events
    named = events.filter(pl.col("kind") == schema.EV_OVERFLOW_ITERATION).sort("line")
    assert named.select("line", "value").rows() == [(7, 8.0), (9, 8.0), (13, 8.0)]
    overflows = events.filter(pl.col("kind").is_in(list(schema.OVERFLOW_KINDS))).sort("line")
    assert overflows["line"].to_list() == [7, 9, 13, 14]


def test_an_out_of_memory_nccl_printed_is_a_second_event_of_its_line() -> None:
    """Megatron-Bridge #771: six ranks' "include/alloc.h:228 NCCL WARN Cuda failure 2 'out of memory'" (L10-20) are
    out_of_memory events, each with a nccl_out_of_memory event beside it, which forensics.infra reads for "NCCL's own
    allocation ran out of memory" instead of looking for the word NCCL in the quoted ending."""
    import polars as pl

    import parsers

    log = ROOT / "tests" / "fixtures" / "real" / "console_errors" / "megatron_bridge_issue771_nccl_oom_six_ranks_excerpt.txt"
    events = parsers.load_run(log).events
    ooms = events.filter(pl.col("kind") == schema.EV_OOM).sort("line")
    nccl = events.filter(pl.col("kind") == schema.EV_NCCL_OUT_OF_MEMORY).sort("line")
    assert nccl["line"].to_list() == [10, 12, 14, 16, 18, 20]
    assert set(nccl["line"]) <= set(ooms["line"])  # each beside its own out_of_memory
