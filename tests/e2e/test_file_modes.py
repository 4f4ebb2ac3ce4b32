"""Issue 9 #9: every file briefd writes was 0600 whatever the umask (mkstemp, no chmod), so in a
shared outbox nobody else could read a report, and a daemon running as its own user could not
read a brief another user had submitted. Files now get the mode the umask gives (0644 under
umask 022), or the `file_mode` setting's.

Every test runs the real `briefd` console script under a real umask (subprocess's `umask=`)
and reads the modes of what it left on disk.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
from pathlib import Path

import pytest

from briefd.daemon.report.chart_png import PNG_FILE
from briefd.daemon.report.charts import CHART_FILE
from tests.conftest import BRIEFD, OllamaLab, Workspace
from lab.corpus import TOPICS

ESTIMATE_BRIEF = {  # an estimate brief: report.json/.md/.html, chart.svg, chart.png, events.ndjson, brief.json
    "question": TOPICS["northgate"].question, "depth": "quick", "max_rounds": 1, "fetch_pages": False,
    "formats": ["md", "json", "html"],
    "estimate": {"unit": "USD million", "low": 100, "high": 2000, "target_width": 100},
}
REJECTED_BRIEF = b'{"qestion": "Why?"}'  # error.json and brief.json
EVERY_OUTBOX_FILE = {"good/report.json", "good/report.md", "good/report.html", f"good/{CHART_FILE}",
                     f"good/{PNG_FILE}", "good/events.ndjson", "good/brief.json", "bad/error.json", "bad/brief.json"}


def modes_under(folder: Path) -> dict[str, int]:
    """Permission bits of everything below `folder` (temp and lock files aside), by relative path;
    folders end in "/"."""
    found = {}
    for path in folder.rglob("*"):
        if not path.name.startswith("."):
            st = path.lstat()
            name = path.relative_to(folder).as_posix() + ("/" if stat.S_ISDIR(st.st_mode) else "")
            found[name] = stat.S_IMODE(st.st_mode)
    return found


def briefd(*args: str, cwd: Path, umask: int, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("BRIEFD_") and k != "OLLAMA_HOST"}
    return subprocess.run([BRIEFD, *args], check=False, cwd=cwd, env={**base, **env}, umask=umask, text=True,
                          capture_output=True, timeout=300)


def run_once(ws: Workspace, umask: int, **env: str) -> dict[str, int]:
    ws.drop("good.json", ESTIMATE_BRIEF)
    ws.drop("bad.json", REJECTED_BRIEF)
    result = subprocess.run([BRIEFD, "run", "--once"], check=False, env=ws.env(**env), cwd=ws.root, umask=umask,
                            text=True, capture_output=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert ws.report("good")["status"] == "done"
    modes = modes_under(ws.outbox)
    assert EVERY_OUTBOX_FILE <= set(modes), sorted(modes)
    return modes


def lab_workspace(root: Path, search_lab, ollama: OllamaLab) -> Workspace:
    (root / "inbox").mkdir(parents=True)
    return Workspace(root=root, searxng_url=search_lab.searxng_url, ollama_url=ollama.url, model="lab-scripted")


def test_reports_are_0644_under_umask_022_and_file_mode_wins_over_the_umask(
        tmp_path: Path, search_lab, scripted_ollama: OllamaLab) -> None:
    """The contract's line: "Files are created with the mode the umask allows (or file_mode)"."""
    shared = run_once(lab_workspace(tmp_path / "shared", search_lab, scripted_ollama), umask=0o022)
    wrong = {name: f"{mode:04o}" for name, mode in shared.items() if mode != (0o755 if name.endswith("/") else 0o644)}
    assert not wrong, f"under umask 022 files should be 0644 and folders 0755: {wrong}"

    # a private umask, but a deployment that says the group reads: file_mode is what they get
    grouped = run_once(lab_workspace(tmp_path / "grouped", search_lab, scripted_ollama), umask=0o077,
                       BRIEFD_FILE_MODE="0640")
    wrong = {name: f"{mode:04o}" for name, mode in grouped.items() if mode != (0o750 if name.endswith("/") else 0o640)}
    assert not wrong, f"with file_mode 0640 files should be 0640 and the folders made for them 0750: {wrong}"


def test_a_private_umask_keeps_files_private(tmp_path: Path) -> None:
    """Under umask 077 nothing briefd writes is readable by others (here a rejected brief: no lab needed)."""
    (tmp_path / "inbox").mkdir()
    (tmp_path / "inbox" / "bad.json").write_bytes(REJECTED_BRIEF)
    result = briefd("run", "--once", cwd=tmp_path, umask=0o077,
                    env={"BRIEFD_SETTLE_SECONDS": "0", "OLLAMA_HOST": "127.0.0.1:9",
                         "BRIEFD_SEARXNG_URL": "http://127.0.0.1:9"})
    assert result.returncode == 0, result.stderr[-3000:]
    modes = modes_under(tmp_path / "outbox")
    assert modes == {"bad/": 0o700, "bad/error.json": 0o600, "bad/brief.json": 0o600}, \
        {name: f"{mode:04o}" for name, mode in modes.items()}


@pytest.mark.parametrize("umask,file_mode,expected", [
    (0o022, None, 0o644),
    (0o077, None, 0o600),
    (0o002, None, 0o664),
    (0o022, "0640", 0o640),
    (0o077, "0o660", 0o660),
], ids=["umask022", "umask077", "umask002", "file_mode0640", "file_mode0o660-over-umask077"])
def test_submit_writes_briefs_the_daemons_user_can_read(tmp_path: Path, umask: int, file_mode: str | None,
                                                        expected: int) -> None:
    brief = tmp_path / "brief.json"
    brief.write_text(json.dumps({"question": "Why was the bridge closed?"}))
    env = {"BRIEFD_FILE_MODE": file_mode} if file_mode else {}
    result = briefd("submit", str(brief), "--inbox", str(tmp_path / "inbox"), cwd=tmp_path, umask=umask, env=env)
    assert result.returncode == 0, result.stderr
    submitted = Path(result.stdout.strip())
    assert submitted.parent == tmp_path / "inbox"
    assert f"{stat.S_IMODE(submitted.stat().st_mode):04o}" == f"{expected:04o}"
    assert submitted.read_bytes() == brief.read_bytes()
    assert [p.name for p in (tmp_path / "inbox").iterdir()] == ["brief.json"], "no temp file left"


@pytest.mark.parametrize("value,words", [
    ("0755", "no execute bits"),
    ("0440", "the owner needs read and write"),
    ("4644", "3 octal digits"),
    ("0648", "3 octal digits"),
    ("rw-r-----", "3 octal digits"),
])
def test_a_bad_file_mode_is_refused_before_anything_is_written(tmp_path: Path, value: str, words: str) -> None:
    brief = tmp_path / "brief.json"
    brief.write_text(json.dumps({"question": "Why was the bridge closed?"}))
    result = briefd("submit", str(brief), "--inbox", str(tmp_path / "inbox"), cwd=tmp_path, umask=0o022,
                    env={"BRIEFD_FILE_MODE": value})
    assert result.returncode == 2
    assert "BRIEFD_FILE_MODE in the environment must be an octal file mode such as 0640" in result.stderr
    assert words in result.stderr and "set e.g. BRIEFD_FILE_MODE=0640" in result.stderr
    assert not (tmp_path / "inbox").exists()
