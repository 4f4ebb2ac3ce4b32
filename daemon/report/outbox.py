"""The report's files in the outbox: outbox/<id>/ holds report.json/.md/.html and the charts, earlier
runs are kept under runs/, and a rejected brief leaves error.json and the bytes it arrived as.

Outbox paths go through `safe_outdir`, every file is written atomically (daemon/core/files.py),
and nothing already in an outbox folder is ever deleted: `archive_previous` moves an earlier
run aside before a new one writes.
"""

from __future__ import annotations

import codecs
import json
import os
import re
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, BinaryIO, Iterable, Mapping

from ...store.db import utc_now
from ..core import files
from ..core.brief import ID_RE, id_from_filename, valid_id
from ..core.untrusted import clean, clean_json
from .charts import report_charts
from .html import html_page
from .markdown import markdown_doc


FORMATS: frozenset[str] = frozenset({"json", "md", "html"})


def _json_safe(value: Any) -> Any:
    """Every string cleaned, like everything else a report shows (a no-op on text that came
    through the door; it matters for a report built from older stored data), and NaN and
    infinities made null."""
    return clean_json(value, finite=True)


def write_report(outdir: Path, report: Mapping[str, Any], formats: Iterable[str]) -> list[Path]:
    """Write the charts (SVG, charts.report_charts), report.json always, report.md for "md",
    report.html for "html", each atomically.

    report.json goes last: its presence means the other files of this run are complete.
    Returns the paths written, in the order written. An unknown format is refused before
    anything is written.
    """
    wanted = set(formats)
    unknown = wanted - FORMATS
    if unknown:
        raise ValueError(f"unknown report format(s): {', '.join(sorted(unknown))}; expected md, json, html")
    outdir = Path(outdir)
    # Render everything first: a report that cannot be rendered or serialized fails here,
    # before any file of the earlier state is replaced.
    # Each chart drawn once (for its file and report.html), report.md's document built once (for both).
    drawn = report_charts(report)
    contents: list[tuple[Path, str]] = [(outdir / name, svg) for name, svg in drawn]
    doc = markdown_doc(report) if wanted & {"md", "html"} else None
    if doc is not None and "md" in wanted:
        contents.append((outdir / "report.md", doc.text))
    if doc is not None and "html" in wanted:
        contents.append((outdir / "report.html", html_page(report, doc, drawn)))
    contents.append((outdir / "report.json",
                     json.dumps(_json_safe(report), indent=2, ensure_ascii=False) + "\n"))
    for path, text in contents:
        files.atomic_write_text(path, text)
    return [path for path, _ in contents]


def _stamp_from_iso(value: Any) -> str | None:
    if not isinstance(value, str) or not value.strip():
        return None
    try:
        moment = datetime.fromisoformat(value.strip())
    except ValueError:
        cleaned = re.sub(r"[^A-Za-z0-9._+-]+", "-", value.strip()).strip(".-")[:64]
        return cleaned or None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H-%M-%SZ")


def _read_json_field(path: Path, field: str) -> Any:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return value.get(field) if isinstance(value, dict) else None


def _movable(entry: os.DirEntry[str]) -> bool:
    # Hidden names are left alone: temp files from a crash (swept elsewhere) or the user's own.
    return not entry.name.startswith(".") and not entry.is_dir(follow_symlinks=False)


def archive_previous(outdir: Path) -> Path | None:
    """Move an earlier run's top-level files into outdir/runs/<stamp>/ so a new run with the
    same id starts clean without destroying anything.

    The stamp is the earlier report.json's started_at, else error.json's rejected_at, else
    the newest file's mtime, all in UTC and filename-safe ("2026-11-22T10-00-00Z"); a taken
    name gets "-2", "-3", ... Returns the folder, or None when there was nothing to move.
    report.json moves last, so a crash half-way leaves it behind to name the next attempt.
    A refusing filesystem raises files.WriteFailed, like every other outbox write.
    """
    try:
        return _archive_previous(Path(outdir))
    except files.WriteFailed:
        raise
    except OSError as exc:
        raise files.WriteFailed(Path(exc.filename or outdir), exc) from exc


def _archive_previous(outdir: Path) -> Path | None:
    if not outdir.is_dir():
        return None
    with os.scandir(outdir) as scan:
        entries = sorted((e for e in scan if _movable(e)), key=lambda e: (e.name == "report.json", e.name))
    if not entries:
        return None
    stamp = (_stamp_from_iso(_read_json_field(outdir / "report.json", "started_at"))
             or _stamp_from_iso(_read_json_field(outdir / "error.json", "rejected_at")))
    if stamp is None:
        newest = max(e.stat(follow_symlinks=False).st_mtime for e in entries)
        stamp = datetime.fromtimestamp(newest, timezone.utc).strftime("%Y-%m-%dT%H-%M-%SZ")
    runs = outdir / "runs"
    target = _fresh_run_folder(runs, stamp)
    for entry in entries:
        os.rename(entry.path, target / entry.name)
    files.fsync_dir(target)
    files.fsync_dir(runs)
    files.fsync_dir(outdir)
    return target


def _fresh_run_folder(runs: Path, stamp: str) -> Path:
    """Create runs/<stamp>, or <stamp>-2, -3, ... when taken: an earlier run is never overwritten."""
    files.make_folders(runs)
    suffix = 1
    while True:
        target = runs / (stamp if suffix == 1 else f"{stamp}-{suffix}")
        try:
            files.make_folder(target)
            return target
        except FileExistsError:
            suffix += 1


def archived_run(outdir: Path, started_at: Any) -> str | None:
    """Where archive_previous put the run that started at `started_at`: "runs/<stamp>/",
    relative to outdir (the report's own folder), or None when no folder there holds its
    report.json (archived by an older briefd under another stamp, or moved by the user)."""
    stamp = _stamp_from_iso(started_at)
    runs = Path(outdir) / "runs"
    if stamp is None or not runs.is_dir():
        return None
    try:
        names = sorted((p.name for p in runs.iterdir() if re.fullmatch(re.escape(stamp) + r"(-\d+)?", p.name)),
                       key=lambda name: (len(name), name))
    except OSError:  # an unreadable runs/ folder costs the report this pointer, never the brief
        return None
    for name in names:
        if _read_json_field(runs / name / "report.json", "started_at") == started_at:
            return f"runs/{name}/"
    return None


def safe_outdir(outbox: Path, brief_id: str) -> Path:
    """outbox/<id>, after making sure it is exactly one folder directly inside the outbox.

    Refuses (ValueError) an id that breaks the id rule (brief.valid_id: no hidden or
    option-like names, no "..") and an entry that resolves anywhere else (a symlink out
    of the outbox, or to a sibling).
    """
    if not valid_id(brief_id):
        raise ValueError(f"invalid brief id {brief_id!r}: expected ^{ID_RE.pattern}$ (1-100 of A-Z a-z 0-9 . _ -, "
                         "not starting with '.' or '-')")
    root = Path(outbox).resolve()
    candidate = root / brief_id
    resolved = candidate.resolve()
    if resolved.parent != root or resolved.name != brief_id:
        raise ValueError(f"brief id {brief_id!r} resolves outside the outbox ({resolved})")
    return candidate


def write_raw_brief(outdir: Path, raw: bytes) -> Path:
    """Keep the bytes a brief arrived as: brief.json when they are UTF-8 text, else brief.bin."""
    try:
        text = raw.decode("utf-8")
        is_text = "\x00" not in text
    except UnicodeDecodeError:
        is_text = False
    path = Path(outdir) / ("brief.json" if is_text else "brief.bin")
    files.atomic_write_bytes(path, raw)
    return path


def _copy_raw_brief(outdir: Path, source: BinaryIO) -> Path:
    """write_raw_brief for a file too large to hold in memory (an oversize brief, up to any
    size a user can drop): streamed to a temp name, fsynced, renamed to brief.json when the
    whole stream is UTF-8 text without NUL, else brief.bin. `source` is the inbox file as
    the inbox opened it (never reopened by name: that could follow a link swapped in)."""

    def copy(out: BinaryIO) -> str:
        decoder = codecs.getincrementaldecoder("utf-8")()
        is_text = True
        source.seek(0)
        while chunk := source.read(1 << 20):
            out.write(chunk)
            if is_text:
                try:
                    is_text = "\x00" not in decoder.decode(chunk)
                except UnicodeDecodeError:
                    is_text = False
        if is_text:
            try:
                decoder.decode(b"", final=True)
            except UnicodeDecodeError:
                is_text = False
        return "brief.json" if is_text else "brief.bin"

    return files.atomic_write_with(Path(outdir), copy, hint="brief")


def write_rejection(outbox: Path, brief_id: str, source_file: str, error: str,
                    details: Mapping[str, Any], raw: bytes | None, *, source: BinaryIO | None = None,
                    aside: bool = False, repeat: bool = True) -> Path:
    """Record a rejected brief: outbox/<id>/error.json ({source_file, error, details,
    rejected_at}) and the received bytes (brief.json, or brief.bin when not text).

    An earlier run in that folder is archived first. An invalid id (the very reason for
    some rejections) is sanitized rather than refused, so a rejection is never lost;
    the folder is returned via error.json's parent. error.json goes last, so when it
    exists the bytes are already kept.

    The inbox's hostile cases (daemon/intake/inbox.py):
    - `raw=None`: nothing was received to keep (a symlink that is never followed, a file
      that cannot be read and stays in the inbox); only error.json is written.
    - `source`: keep this open file's whole content instead of `raw`, streamed (a brief
      over the size cap: the inbox read only its head, and the user's bytes must be kept
      in full before the file leaves the inbox).
    - `aside=True`: a run of the same id is using outbox/<id> right now (its brief.json and
      events.ndjson are live there); archiving them mid-run would split that run's files,
      so the rejection goes to outbox/<id>/runs/<now>-rejected/ instead.
    - `repeat=False`: when outbox/<id>/error.json already says this very error about this
      very file, write nothing (a notice about a file left in the inbox is said once, not
      again at every restart, each archiving the last).
    """
    outdir = safe_outdir(outbox, brief_id if valid_id(brief_id) else id_from_filename(brief_id))
    if not repeat and (_read_json_field(outdir / "error.json", "source_file") == clean(source_file)
                       and _read_json_field(outdir / "error.json", "error") == clean(error)):
        return outdir / "error.json"
    now = utc_now()
    if aside:
        outdir = _fresh_run_folder(outdir / "runs", now.replace(":", "-") + "-rejected")
    else:
        archive_previous(outdir)
    if source is not None:
        _copy_raw_brief(outdir, source)
    elif raw is not None:
        write_raw_brief(outdir, raw)
    path = outdir / "error.json"
    files.atomic_write_json(path, _json_safe({
        "source_file": source_file,
        "error": error,
        "details": dict(details),
        "rejected_at": now,
    }))
    return path
