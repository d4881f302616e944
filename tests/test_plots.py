"""The report's plots, read from the matplotlib figures: legends outside the data, markers named exactly when drawn,
a loss-scale panel for fp16 runs only, an overview that is not the per-attempt loss panel again."""

from __future__ import annotations

import dataclasses
import shutil

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import polars as pl
import pytest
from conftest import SAMPLES, real

import forensics
import parsers
from forensics.compare import curves
from forensics.findings import Anomaly
from reports import plots

FP16_REAL = "meg_gpt2_base_n4_dp1_tp4_pp4"      # a real fp16 Megatron log: loss scale 2**23 down to 2**14, one attempt
FP16_NO_LOSS = "meg_gpt2_perf_n16.out"          # a real fp16 perf log: loss scale only (every logged loss skipped)
MARKER_LABELS = {marker: label for marker, _, label in plots._MARKS.values()}


def _load(path):
    runs = parsers.load_runs(path)
    return runs[0].metrics, forensics.analyze(*runs).runs[0]


@pytest.fixture(scope="module")
def tr8():  # fp16, three attempts (two rollbacks), spikes, divergences, NaN, loss-scale collapses
    return _load(SAMPLES / "tr8-104B-sample")


@pytest.fixture(scope="module")
def clean():  # one attempt, "loss scale: 1.0" throughout (bf16), no anomaly
    return _load(SAMPLES / "clean-1.3B")


@pytest.fixture(scope="module")
def fp16_real():
    return _load(real(FP16_REAL))


@pytest.fixture(scope="module")
def figures():
    """A run's figures, built once and drawn (so legends and axes have their final place); closed afterwards."""
    made: dict[str, dict] = {}

    def build(frame, run):
        if run.name not in made:
            made[run.name] = plots.run_figures(frame, run)
            for fig in made[run.name].values():
                fig.canvas.draw()
        return made[run.name]

    yield build
    for figs in made.values():
        for fig in figs.values():
            plt.close(fig)


def _legend_labels(fig) -> list[str]:
    return [t.get_text() for ax in fig.axes if ax.get_legend() for t in ax.get_legend().get_texts()]


def _drawn_marks(fig) -> set[str]:
    """The anomaly kinds (their legend labels) drawn on the axes: markers at a point, a NaN as a black vertical line."""
    drawn = set()
    for ax in fig.axes:
        for line in ax.get_lines():
            marker, color = line.get_marker(), line.get_color()
            if marker in MARKER_LABELS and len(line.get_xdata()) == 1:
                drawn.add(MARKER_LABELS[marker])
            elif color == "black" and line.get_linestyle() == "-" and len(set(line.get_xdata())) == 1:
                drawn.add("NaN")
    return drawn


def _ylabels(fig) -> list[str]:
    return [ax.get_ylabel() for ax in fig.axes]


def test_legends_sit_outside_every_axes_and_inside_the_image(tr8, figures):
    figs = figures(*tr8)
    assert sorted(figs) == ["attempts", "overview"]
    for name, fig in figs.items():
        legends = [ax.get_legend() for ax in fig.axes if ax.get_legend()]
        assert len(legends) == 1, name
        box = legends[0].get_window_extent()
        for ax in fig.axes:
            assert not box.overlaps(ax.get_window_extent()), (name, ax.get_ylabel())
            assert box.x0 > ax.get_window_extent().x1, name
        assert fig.bbox.x0 <= box.x0 and box.x1 <= fig.bbox.x1 and fig.bbox.y0 <= box.y0 and box.y1 <= fig.bbox.y1


@pytest.mark.parametrize("case, marks", [
    ("tr8", {"attempts": {"spike", "divergence", "NaN", "loss-scale collapse"},
             "overview": {"spike", "divergence", "NaN"}}),  # the overview has no loss-scale panel
    ("fp16_real", {"attempts": {"spike"}}),   # its loss-above-chance finding has no marker
    ("clean", {"attempts": set()}),
])
def test_the_legend_names_exactly_the_marker_kinds_drawn(case, marks, figures, request):
    figs = figures(*request.getfixturevalue(case))
    assert set(figs) == set(marks)
    for name, fig in figs.items():
        assert _drawn_marks(fig) == marks[name], name
        legend = _legend_labels(fig)
        assert {label for label in legend if label in MARKER_LABELS.values()} == marks[name], name
        assert len(legend) == len(set(legend)), legend  # "spike" once, though drawn for the loss and the grad norm
        title = fig.axes[0].get_title()
        assert not set("▲▼■|") & set(title) and "spike" not in title, title  # titles name no marker


def test_an_anomaly_without_a_value_is_still_drawn_where_the_legend_says(clean):
    frame, run = clean
    lost = Anomaly(kind="divergence", metric="loss", attempt=1, step=1500, end_step=1500, value=None, baseline=None)
    fig = plots.run_figures(frame, dataclasses.replace(run, anomalies=[lost]))["attempts"]
    try:
        fig.canvas.draw()
        marks = [line for line in fig.axes[0].get_lines() if line.get_marker() == "v"]
        assert [(line.get_xdata()[0], line.get_ydata()[0]) for line in marks] == [(1500, 0.97)]  # at the top edge
        assert "divergence" in _legend_labels(fig) and _drawn_marks(fig) == {"divergence"}
    finally:
        plt.close(fig)


def test_attempt_legend_entries_and_rollback_line(tr8, figures):
    legend = _legend_labels(figures(*tr8)["attempts"])
    assert legend[:4] == ["attempt 1", "attempt 2", "attempt 3", "rollback resume point"]


def test_loss_scale_panel_for_fp16_runs_only(tr8, fp16_real, clean, figures):
    for case in (tr8, fp16_real):
        fig = figures(*case)["attempts"]
        assert _ylabels(fig) == ["loss", "grad norm", "loss scale"]
        panel = fig.axes[-1]
        assert panel.get_yscale() == "log"
        assert panel.get_lines() and "loss scale" in fig.axes[0].get_title()
    tr8_panel = figures(*tr8)["attempts"].axes[-1]
    collapses = [line for line in tr8_panel.get_lines() if line.get_marker() == "s"]
    assert sorted(int(line.get_xdata()[0]) for line in collapses) == sorted(
        a.step for a in tr8[1].anomalies if a.kind == "loss_scale_collapse") and len(collapses) == 2
    fig = figures(*clean)["attempts"]  # "loss scale: 1.0" throughout: bf16, no panel
    assert _ylabels(fig) == ["loss", "grad norm"] and "loss scale" not in fig.axes[0].get_title()


def test_an_fp16_run_with_only_a_loss_scale_still_gets_its_panel(figures):
    figs = figures(*_load(real(FP16_NO_LOSS)))
    assert list(figs) == ["attempts"] and _ylabels(figs["attempts"]) == ["loss scale"]


def test_single_attempt_runs_get_no_overview_repeating_the_loss_panel(clean, fp16_real, tmp_path):
    for frame, run in (clean, fp16_real):
        assert len(run.attempts) == 1
        written = plots.plot_run(frame, run, tmp_path)
        assert list(written) == ["attempts"]
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        f"{plots.slug(fp16_real[1].name)}-attempts.png", "clean-1.3B-attempts.png"]


def test_the_overview_gives_each_attempt_its_own_lane(tr8, figures):
    frame, run = tr8
    figs = figures(frame, run)
    lanes = figs["overview"].axes
    assert [ax.get_ylabel() for ax in lanes] == ["attempt 1: ended in NaN/Inf", "attempt 2: ended in NaN/Inf",
                                                 "attempt 3: diverged"]
    steps = {a.index: set(frame.filter((pl.col("metric") == "loss") & (pl.col("attempt") == a.index)
                                       & pl.col("value").is_finite())["step"].to_list()) for a in run.attempts}
    for attempt, ax in zip(run.attempts, lanes, strict=True):
        own = [line for line in ax.get_lines() if len(line.get_xdata()) > 2 and line.get_color() != plots._CONTEXT]
        assert len(own) == 1  # one attempt in colour, the others grey behind it
        assert set(own[0].get_xdata()) == steps[attempt.index]
    loss_panel = figs["attempts"].axes[0]  # the per-attempt loss panel overlays all three in colour
    assert len([line for line in loss_panel.get_lines() if len(line.get_xdata()) > 2]) == 3


def test_plot_run_pngs_are_byte_for_byte_repeatable(tr8, tmp_path):
    a, b = (plots.plot_run(*tr8, tmp_path / name) for name in ("a", "b"))
    assert [p.name for p in a.values()] == ["tr8-104B-sample-overview.png", "tr8-104B-sample-attempts.png"]
    for key in a:
        assert a[key].read_bytes() == b[key].read_bytes() and a[key].read_bytes()[:4] == b"\x89PNG"


def test_overlay_legend_outside_and_the_x_named_only_when_drawn(tr8, clean):
    overlay = pl.concat([curves(run.name, frame) for frame, run in (tr8, clean)], how="vertical_relaxed")
    for markers, named in (({}, False), ({"tr8-104B-sample": 6950}, True)):
        figs = plots.overlay_figures(overlay, markers)
        try:
            for _, fig in figs.values():
                fig.canvas.draw()
                ax = fig.axes[0]
                legend = ax.get_legend()
                assert legend.get_window_extent().x0 > ax.get_window_extent().x1
                labels = [t.get_text() for t in legend.get_texts()]
                assert labels[:2] == ["tr8-104B-sample", "clean-1.3B"]
                assert ("diverged or hit NaN" in labels) == named
                assert any(line.get_marker() == "x" for line in ax.get_lines()) == named
        finally:
            for _, fig in figs.values():
                plt.close(fig)


def test_long_run_names_are_shortened_in_the_middle():
    name = "bigscience-workshop+bigscience__experiments_gpt2-meg_meg_gpt2_base_n4_dp1_tp4_pp4-1809579"
    short = plots._short(name)
    assert len(short) == plots.LABEL_CHARS and short.startswith("bigscience-") and short.endswith("pp4-1809579")
    assert plots._short("clean-1.3B") == "clean-1.3B"


def test_a_crowded_figure_writes_no_library_warning() -> None:
    """Issue 18: matplotlib's "Tight layout not applied" warning reached stderr on a successful run (27 real
    Megatron logs read as one run, one overview lane per attempt, before lanes were capped at MAX_LANES). A figure too
    crowded to tighten is kept as it is, without a word on stderr."""
    import warnings

    fig, axes = plt.subplots(8, 1, figsize=(3, 1))
    for ax in axes:
        ax.set_ylabel("attempt 1: loss")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            plots._tight(fig)
        with pytest.warns(UserWarning, match="Tight layout not applied"):
            fig.tight_layout()  # what _tight keeps quiet
    finally:
        plt.close(fig)


def test_a_run_of_many_real_logs_writes_nothing_on_stderr(tmp_path) -> None:
    """The whole command on a run of many attempts (the smallest real Megatron logs of the fixtures read as one
    run): its report and plots, and not one line on stderr."""
    import subprocess
    import sys

    from conftest import REAL

    logs = tmp_path / "logs"
    logs.mkdir()
    for log in sorted((p for p in REAL.iterdir() if p.is_file()), key=lambda p: p.stat().st_size)[:8]:
        shutil.copy(log, logs)
    done = subprocess.run([sys.executable, "-m", "forensics.cli", "analyze", str(logs), "-o",
                           str(tmp_path / "r.md")], capture_output=True, text=True, cwd=tmp_path)
    assert (done.returncode, done.stderr) == (0, "")
    assert sorted(p.name for p in (tmp_path / "r_files").iterdir()) == ["logs-attempts.png", "logs-overview.png"]


def test_an_overview_of_hundreds_of_attempts_draws_a_bounded_number_of_lanes_and_lines(clean) -> None:
    """Issue 18 (fuzzing): duplicated or reordered steps made runs of 148-322 attempts, and the overview drew one lane
    per attempt with every other attempt inside each lane: attempts squared artists, 20 s to over 120 s a report. Now
    the first, the last and the attempts with anomalies get a lane (at most MAX_LANES), the rest one grey series."""
    frame, run = clean
    n, width = 300, 10  # clean-1.3B's 3,000 steps cut into 300 attempts of 10 steps each
    many = frame.filter(pl.col("metric").is_in(["loss", "grad_norm"])).with_columns(
        attempt=((pl.col("step") - 1) // width + 1).cast(pl.Int32))
    attempts = [dataclasses.replace(run.attempts[0], index=k, start_step=(k - 1) * width + 1, end_step=k * width,
                                    points=width) for k in range(1, n + 1)]
    spike = Anomaly(kind="loss_spike", metric="loss", attempt=150, step=1495, end_step=1495, value=3.0, baseline=2.0)
    nan = Anomaly(kind="nan", metric="loss", attempt=77, step=765, end_step=765, value=None, baseline=None)
    figs = plots.run_figures(many, dataclasses.replace(run, attempts=attempts, anomalies=[spike, nan]))
    try:
        assert sorted(figs) == ["attempts", "overview"]
        overview = figs["overview"]
        overview.canvas.draw()
        lanes = [ax.get_ylabel().split(":")[0] for ax in overview.axes]
        assert len(lanes) == plots.MAX_LANES
        assert {"attempt 1", "attempt 77", "attempt 150", "attempt 300"} <= set(lanes)
        assert lanes == sorted(lanes, key=lambda label: int(label.split()[1]))  # in run order
        lines = [line for ax in overview.axes for line in ax.get_lines()]
        assert len(lines) <= 4 * plots.MAX_LANES  # not one per attempt per lane (300 x 300)
        for ax in overview.axes:  # one grey series of the other attempts, all 299 of them, in every lane
            grey = [line for line in ax.get_lines() if line.get_color() == plots._CONTEXT]
            assert len(grey) == 1 and len(grey[0].get_xdata()) <= plots.CONTEXT_POINTS + n
        assert f"{n - plots.MAX_LANES} attempts are not drawn individually" in overview.axes[0].get_title()
        assert _drawn_marks(overview) == {"spike", "NaN"}
    finally:
        for fig in figs.values():
            plt.close(fig)


# the fairseq log line a fuzzed mutant was shrunk to: a step and a grad norm of 1e308, no loss
HUGE_FAIRSEQ = b'| train_inner | {"epoch": 1e308,"num_updates": "1e308",  "gnorm": "1e308", "cl '


def test_values_near_the_float_limit_are_plotted_without_ticks_not_an_internal_error(tmp_path) -> None:
    """Issue 18 (fuzzing): a grad norm of 1e308 made matplotlib's tick locator fail while laying out the figure
    ("ValueError: arange: cannot compute length"); an axis with such limits now gets no ticks."""
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "train.log").write_bytes(HUGE_FAIRSEQ)
    frame, run = _load(tmp_path / "run")
    assert frame["value"].to_list() == [1e308]
    written = plots.plot_run(frame, run, tmp_path / "plots")
    assert list(written) == ["attempts"] and written["attempts"].read_bytes()[:4] == b"\x89PNG"
    for limits in ((-1e308, 1e308), (-1.0, 1e308), (1e300, 1e308)):  # ranges that overflow, limits beyond ABSURD
        fig, ax = plt.subplots()
        try:
            ax.plot([1, 2], [limits[0], 1.0])
            ax.set_ylim(*limits)
            plots._tight(fig)
            plots._save(fig, tmp_path / "limits.png")
            assert len(ax.get_yticks()) == 0 and len(ax.get_xticks()) > 0  # the sane x axis keeps its ticks
        finally:
            plt.close(fig)


def test_a_loss_of_the_largest_float_on_a_log_axis_writes_no_library_warning(tmp_path) -> None:
    """Fuzzing (campaign 2029, mutant 143): one nanoGPT loss of 1.797e308 made matplotlib warn "overflow encountered
    in exp" on stderr while the figure was drawn (marks on a log axis with such limits)."""
    import subprocess
    import sys

    from conftest import ROOT

    text = (ROOT / "tests/fixtures/real/nanogpt/ChenZihua-cn_nanoGPT_train.log").read_text()
    assert "iter 280: loss 3.4342," in text
    (tmp_path / "train.log").write_text(text.replace("iter 280: loss 3.4342,", "iter 280: loss 1.7976931348623157e308,"))
    done = subprocess.run([sys.executable, "-m", "forensics.cli", "analyze", str(tmp_path / "train.log"), "-o",
                           str(tmp_path / "out" / "r.md")], capture_output=True, text=True, cwd=tmp_path)
    assert (done.returncode, done.stderr) == (0, "")
    assert any((tmp_path / "out" / "r_files").glob("*.png"))
