"""Issue 8 #6: valid briefs that could not finish.

`{"low": -1e308, "high": 1e308, "target_width": 1e-300}` passed validation and failed in
matplotlib; `{"low": 5e-324, "high": 1e-323}` failed with ZeroDivisionError in the progress
score. Both ended `failed`. Now validation refuses them naming the field and the fix, a brief
at the edges of what validation allows finishes `done`, and a chart that cannot be drawn
leaves a report that says why instead of failing the brief.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from briefd.daemon.core.brief import ESTIMATE_MAX_ABS, estimate_min_width
from briefd.daemon.report.chart_png import NO_MATPLOTLIB, PNG_FILE
from briefd.daemon.report.charts import CHART_FILE, RELEVANCE_FILE, SOURCES_FILE, report_charts
from tests.conftest import BRIEFD, Workspace
from lab.corpus import TOPICS

QUESTION = TOPICS["northgate"].question
QUICK = {"depth": "quick", "max_rounds": 1}

# The two briefs, and the field each error must name.
UNFINISHABLE = {
    "huge-band": ({"question": QUESTION, **QUICK, "estimate": {
        "unit": "USD million", "low": -1e308, "high": 1e308, "target_width": 1e-300}}, "estimate.low"),
    "denormal-band": ({"question": QUESTION, **QUICK, "estimate": {
        "unit": "USD million", "low": 5e-324, "high": 1e-323, "target_low": 5e-324, "target_high": 1e-323}},
        "estimate.high"),
}
# Valid, and as close to the limits as validation allows.
WIDEST = {"question": QUESTION, **QUICK, "estimate": {
    "unit": "USD million", "low": -ESTIMATE_MAX_ABS, "high": ESTIMATE_MAX_ABS,
    "target_width": estimate_min_width(-ESTIMATE_MAX_ABS, ESTIMATE_MAX_ABS)}}
NARROWEST = {"question": QUESTION, **QUICK, "estimate": {
    "unit": "USD million", "low": 0, "high": estimate_min_width(0, 0), "target_low": 0, "target_high": 0}}
POINT = {"question": QUESTION, **QUICK, "estimate": {"unit": "USD million", "low": 700, "high": 700}}  # low <= high
EDGES = {"widest": WIDEST, "narrowest": NARROWEST, "point": POINT}


@pytest.mark.parametrize("name", list(UNFINISHABLE))
def test_submit_refuses_the_unfinishable_briefs_naming_the_field(name: str, tmp_path: Path) -> None:
    brief, field = UNFINISHABLE[name]
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(brief))
    result = subprocess.run([BRIEFD, "submit", str(path), "--inbox", str(tmp_path / "inbox")],
                            cwd=tmp_path, text=True, capture_output=True, timeout=120, check=False)
    assert result.returncode == 2, result.stdout + result.stderr
    assert f"{path}: {field}" in result.stderr and "unit" in result.stderr, result.stderr
    assert not (tmp_path / "inbox").exists() or not list((tmp_path / "inbox").iterdir())


def test_edge_briefs_finish_done_and_the_unfinishable_ones_are_refused(workspace: Workspace) -> None:
    for name, (brief, _field) in UNFINISHABLE.items():
        workspace.drop(f"{name}.json", brief)
    for name, brief in EDGES.items():
        workspace.drop(f"{name}.json", brief)
    result = workspace.briefd("run", "--once", timeout=600)
    assert result.returncode == 0, result.stderr[-4000:]

    for name, (_brief, field) in UNFINISHABLE.items():
        folder = workspace.outbox / name
        assert not (folder / "report.json").exists(), f"{name} was accepted and run"
        error = json.loads((folder / "error.json").read_text(encoding="utf-8"))
        assert error["details"]["field"] == field and field in error["error"]

    for name, brief in EDGES.items():
        report = workspace.report(name)
        assert report["status"] == "done", (name, report.get("error"))
        assert report["estimate"]["initial"] == {"low": brief["estimate"]["low"], "high": brief["estimate"]["high"]}
        assert 0.0 <= report["estimate"]["progress_score"] <= 1.0
        assert report["chart"] == {"file": CHART_FILE, "missing": None, "png": PNG_FILE, "png_missing": None}
        assert (workspace.outbox / name / CHART_FILE).read_text(encoding="utf-8").startswith("<svg ")
        assert (workspace.outbox / name / PNG_FILE).read_bytes().startswith(b"\x89PNG")
        assert workspace.events(name)[-1]["type"] == "complete"


@pytest.mark.skipif(shutil.which("latex") is not None, reason="needs a host without LaTeX (text.usetex must fail); runs wherever latex is not installed, as in CI")
def test_a_chart_matplotlib_cannot_draw_leaves_a_done_report_that_says_why(workspace: Workspace) -> None:
    """A real matplotlib failure in the daemon: a matplotlibrc that asks for LaTeX on a host without it
    (what a user's own ~/.config/matplotlib/matplotlibrc can do to an unattended daemon). chart.svg
    needs no matplotlib: it is drawn, and only chart.png is missing, with the reason."""
    rc = workspace.root / "matplotlibrc"
    rc.write_text("text.usetex: True\n")
    workspace.drop("cost.json", {"question": QUESTION, **QUICK,
                                 "estimate": {"unit": "USD million", "low": 100, "high": 2000, "target_width": 100}})
    result = workspace.briefd("run", "--once", timeout=600, MATPLOTLIBRC=str(rc))
    assert result.returncode == 0, result.stderr[-4000:]
    report = workspace.report("cost")
    assert report["status"] == "done", report.get("error")
    assert report["chart"]["file"] == CHART_FILE and report["chart"]["missing"] is None
    assert report["chart"]["png"] is None and "latex" in report["chart"]["png_missing"].lower()
    assert (workspace.outbox / "cost" / CHART_FILE).exists() and not (workspace.outbox / "cost" / PNG_FILE).exists()
    assert "No chart:" not in (workspace.outbox / "cost" / "report.md").read_text(encoding="utf-8")
    events = workspace.events("cost")
    assert any(e["type"] == "signal" and e.get("message") == "chart.png not drawn" and "latex" in e["reason"].lower()
               for e in events)
    assert events[-1]["type"] == "complete"


def test_without_matplotlib_an_estimate_brief_gets_its_svg_charts_and_a_note(workspace: Workspace) -> None:
    """The runtime install has no matplotlib (it is the png extra): a daemon that cannot import it
    writes chart.svg and the evidence charts, says in report.json how to get chart.png, and logs
    no "not drawn" event for what nobody asked for. `sys.modules["matplotlib"] = None` is how
    Python marks a module absent: importing it fails and importlib finds no spec."""
    blocker = workspace.root / "no-matplotlib"
    blocker.mkdir()
    (blocker / "sitecustomize.py").write_text('import sys\nsys.modules["matplotlib"] = None\n')
    workspace.drop("cost.json", {"question": QUESTION, **QUICK,
                                 "estimate": {"unit": "USD million", "low": 100, "high": 2000, "target_width": 100}})
    pythonpath = os.pathsep.join(p for p in (str(blocker), os.environ.get("PYTHONPATH", "")) if p)
    result = workspace.briefd("run", "--once", timeout=600, PYTHONPATH=pythonpath)
    assert result.returncode == 0, result.stderr[-4000:]
    report = workspace.report("cost")
    assert report["status"] == "done", report.get("error")
    assert report["chart"] == {"file": CHART_FILE, "missing": None, "png": None, "png_missing": NO_MATPLOTLIB}
    folder = workspace.outbox / "cost"
    assert not (folder / PNG_FILE).exists()
    names = [CHART_FILE, *([SOURCES_FILE, RELEVANCE_FILE] if report["evidence"] else [])]
    for name in names:
        assert (folder / name).read_text(encoding="utf-8") == dict(report_charts(report))[name], name
    assert not [e for e in workspace.events("cost") if e["type"] == "signal" and "not drawn" in str(e.get("message"))]
