"""What `briefd check` and the HTTP API's `GET /healthz` know: is each service, folder and store usable.

Each check is (ok, what it found, the fix or None). The probes of the model servers and SearXNG
run with their own timeouts; nothing here changes anything but a temp file in each folder.
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

from .status import open_store
from ..core.settings import Settings, openai_key, settings_table
from ...store import Store, damaged, diagnose
from ..model import check
from ..model.decoding import decoding_line, time_structured
from ..rules.judge import is_path_key
from ..model.hosts import model_config, model_hosts
from ..sources import egress, library, search
from ..sources.archives import Archives

Check = tuple[bool, str, str | None]


async def run_checks(settings: Settings, *, create_store: bool = True, decoding: bool = False) -> list[Check]:
    """Every check, in the order `briefd check` prints them: each model server, SearXNG, egress,
    the folders, the database, the library and each archive. The checks of folders and files run
    on a thread (a store's quick_check reads the whole file): the API's event loop is the daemon's.
    `create_store` False (GET /healthz): a store not made yet is said so, not created by asking.
    `decoding` (`briefd check`, not /healthz: it costs three short generations): how fast the model
    writes JSON each way `structured` can ask for it, on the first model server, when it serves the model."""
    results: list[Check] = []
    models = model_hosts(settings)
    key = openai_key(settings)
    probes = await asyncio.gather(*(check.probe(host, settings.model, 10.0, settings.model_api, key)
                                    for host in models))
    for probe in probes:
        results.append((probe.ok, probe.message, probe.fix))  # one line per model server
    if decoding and probes and probes[0].ok:
        trials = await time_structured(model_config(settings), key)
        results.append((True, decoding_line(trials, settings.structured, settings.model), None))
    if settings.egress == "none":  # never contacted under none: probing it would break the promise
        results.append((True, f"SearXNG {settings.searxng_url} is not used (egress = none)", None))
    else:
        sprobe = await search.probe(settings.searxng_url)
        results.append((sprobe.ok, sprobe.message, sprobe.fix))
    results.append((True, egress.check_line(settings.egress, settings.egress_hosts, settings.searxng_url,
                                            models), None))
    results += await asyncio.to_thread(_local_checks, settings, create_store)
    if settings.archives:
        shelf = await asyncio.to_thread(Archives.from_settings, settings)  # libzim runs in the shelf's child
        try:
            results += [(h.ok, h.line() if h.ok else f"archive {h.file}: {h.problem}", h.fix) for h in shelf.health()]
        finally:
            shelf.close()
    return results


def _local_checks(settings: Settings, create_store: bool) -> list[Check]:
    """The folders, the database and the library: checks of this machine's files."""
    results = [_writable(name, folder) for name, folder in (("inbox", Path(settings.inbox)),
                                                            ("outbox", Path(settings.outbox)))]
    db = Path(settings.db)
    if not create_store and not db.exists():
        results.append((True, f"database {db} is not made yet: the daemon makes it when it starts", None))
    else:
        results.append(_db_health(db))
    results.append(_library_health(settings))
    tiers = _tier_paths(settings)
    if tiers is not None:
        results.append(tiers)
    return results


def _tier_paths(settings: Settings) -> Check | None:
    """The `source_tiers` rules that name a folder or archive (judge.is_path_key): each must exist
    and lie where briefd reads documents (a `library` folder, or one of `archives`), else it tiers
    nothing and the operator's manuals stay unrated without a word. None when no rule names a path."""
    keys = [key for key, _ in settings.source_tiers if is_path_key(key)]
    if not keys:
        return None
    missing = [key for key in keys if not Path(key).exists()]
    if missing:
        return False, f"source_tiers names {', '.join(missing)}, which does not exist", \
            "correct the path in `source_tiers` (a library folder or an archive file), or remove its rule"
    unread = [key for key in keys if not _read_by_briefd(Path(key), settings)]
    if unread:
        return False, f"source_tiers names {', '.join(unread)}, which is in no `library` folder and is not one of " \
                      "`archives`: its rule tiers no document", \
            "add the folder to `library` (or the file to `archives`), or point the rule at a folder inside one"
    return True, f"source_tiers: {len(keys)} rule(s) tier library folders or archives", None


def _read_by_briefd(path: Path, settings: Settings) -> bool:
    """`path` overlaps a library folder (lies in one, or holds one) or is one of the archives."""
    return path in settings.archives or any(
        path == folder or folder in path.parents or path in folder.parents for folder in settings.library)


def _library_health(settings: Settings) -> Check:
    store = open_store(settings) if settings.library else None
    try:
        return library.health(store, settings.library)
    finally:
        if store is not None:
            store.close()


def _writable(name: str, folder: Path) -> Check:
    row = next(row for row in settings_table() if row["name"] == name)
    for path in (folder, *folder.parents):  # the first that exists must be a folder: mkdir says only "File exists"
        if path.is_dir():
            break
        if path.exists() or path.is_symlink():
            what = "a file, not a folder" if path.is_file() else "not a folder"
            where = f"is {what}" if path == folder else f"cannot be created: {path} is {what}"
            return False, f"{name} {folder} {where}", \
                f"point {row['flag']} ({row['env']}) at a folder, or move {path} away so that briefd can create it"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".briefd-check.", suffix=".tmp"):
            pass
    except OSError as exc:
        return False, f"{name} {folder} is not writable: {exc.strerror or exc}", \
            f"create it and give briefd's user write access, or set --{name}"
    return True, f"{name} {folder} is writable", None


def _db_health(path: Path) -> Check:
    """Open the store and run PRAGMA quick_check; its own lines name any damage."""
    try:
        store = Store(path)
    except Exception as exc:  # sqlite raises several types; diagnose says what each means
        problem = diagnose(exc, path)
        if problem is None:
            return False, f"database {path} cannot be opened: {exc}", "check the path and its permissions"
        return False, f"database {path} cannot be opened: it {problem.reason}", problem.fix
    try:
        lines = store.quick_check()
    except Exception as exc:  # quick_check itself stops on some damage: that is its report
        problem = diagnose(exc, path) or damaged(path, f"is damaged ({exc})")
        return False, f"database {path} failed its check (PRAGMA quick_check stopped: {exc})", problem.fix
    finally:
        store.close()
    if lines != ["ok"]:
        shown = "\n       ".join(lines)
        return False, f"database {path} failed its check (PRAGMA quick_check):\n       {shown}", \
            damaged(path, "").fix
    return True, f"database {path} is healthy", None
