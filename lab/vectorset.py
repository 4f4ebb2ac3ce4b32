"""The documents the rule vectors are read from: Debian packages briefd's real-document set does not use.

Why: a rule that reads figures, units or relevance is judged on sentences it was not written from. The
vectors (lab/vectors/dev.json and test.json, `briefd eval --vectors`) quote real sentences of the
manuals, configuration references, normative texts, books, changelogs and licence texts below; this module
downloads those packages (`apt-get download`, nothing installed; lab/docset.py's cache and renderer)
and turns each kept file into the text briefd itself reads from it (daemon/sources/documents.py: a man page
rendered by groff, an HTML page through briefd's extraction, a plain file shaped as a library document), so
that a case's quote is a verbatim span of what briefd would have read.

The held-out manuals (SQLite, PostgreSQL, Python, R) and the real-document set's 13 packages are not here.

    python -m lab.vectorset build [--packages chrony,...]   the texts, under the cache (printed)
    python -m lab.vectorset units chrony/chrony.conf.5      numbered citable units, as a model sees them
    python -m lab.vectorset quote chrony/chrony.conf.5 "maxpoll"   quote and context for a case (JSON)
    python -m lab.vectorset check lab/vectors/dev.json     every quote a span of its document
"""

from __future__ import annotations

import argparse
import fnmatch
import gzip
import hashlib
import json
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from lab.docset import DocsetUnavailable, cache_root, download, render_man

BUILD_VERSION = 1  # bump when the way texts are made changes: built texts are cached by it
VECTORS = Path(__file__).resolve().parent / "vectors"
GENRES = ("man", "config-reference", "normative", "license", "book", "html-manual", "changelog",
          "annotated-config")


@dataclass(frozen=True)
class Package:
    """A Debian package and the files kept of it: (glob under its root, the genre of that file's text)."""

    name: str
    keep: tuple[tuple[str, str], ...]


def _man(genre: str, *pages: str) -> tuple[tuple[str, str], ...]:
    return tuple((f"usr/share/man/man{page.rsplit('.', 1)[1][0]}/{page}.gz", genre) for page in pages)


PACKAGES: tuple[Package, ...] = (
    Package("coreutils", _man("man", "sort.1", "split.1", "timeout.1", "shred.1", "df.1", "du.1")
            + (("usr/share/doc/coreutils/NEWS.gz", "changelog"),)),
    Package("xz-utils", _man("man", "xz.1")),
    Package("gzip", _man("man", "gzip.1") + (("usr/share/doc/gzip/NEWS.gz", "changelog"),)),
    Package("bzip2", _man("man", "bzip2.1")),
    Package("lz4", _man("man", "lz4.1")),
    Package("iputils-ping", _man("man", "ping.8")),
    Package("traceroute", _man("man", "traceroute.db.1")),
    Package("bind9-dnsutils", _man("man", "dig.1", "nslookup.1")),
    Package("memcached", _man("man", "memcached.1")),
    Package("tmux", _man("man", "tmux.1")),
    Package("screen", _man("man", "screen.1")),
    Package("less", _man("man", "less.1") + (("usr/share/doc/less/NEWS.gz", "changelog"),)),
    Package("procps", _man("man", "top.1", "watch.1", "sysctl.8")),
    Package("openssl", _man("man", "openssl-req.1ssl", "openssl-x509.1ssl", "openssl-genrsa.1ssl",
                            "openssl-s_client.1ssl")),
    Package("gpg-agent", _man("man", "gpg-agent.1")),
    Package("gpg", _man("man", "gpg.1")),
    Package("gnupg", (("usr/share/doc/gnupg/NEWS.gz", "changelog"),)),
    Package("chrony", _man("config-reference", "chrony.conf.5") + _man("man", "chronyc.1")
            + (("usr/share/doc/chrony/NEWS.gz", "changelog"),)),
    Package("unbound", _man("config-reference", "unbound.conf.5")),
    Package("systemd", _man("config-reference", "journald.conf.5", "logind.conf.5", "systemd-system.conf.5",
                            "systemd.service.5", "systemd.exec.5", "timesyncd.conf.5")
            + (("usr/share/doc/systemd/NEWS.gz", "changelog"),)),
    Package("sudo", _man("config-reference", "sudoers.5")),
    Package("nfs-common", _man("config-reference", "nfs.5")),
    Package("e2fsprogs", _man("config-reference", "mke2fs.conf.5") + _man("man", "mke2fs.8", "tune2fs.8")),
    Package("fail2ban", _man("config-reference", "jail.conf.5")),
    Package("dnsmasq-base", _man("config-reference", "dnsmasq.8")),
    Package("logrotate", _man("config-reference", "logrotate.8")),
    Package("apt", _man("config-reference", "apt.conf.5")),
    Package("smartmontools", _man("config-reference", "smartd.conf.5")),
    Package("mosquitto", _man("config-reference", "mosquitto.conf.5")),
    Package("postfix", _man("config-reference", "postconf.5")),
    Package("debian-policy", (("usr/share/doc/debian-policy/policy.txt.gz", "normative"),
                              ("usr/share/doc/debian-policy/fhs/fhs-3.0.txt.gz", "normative"),
                              ("usr/share/doc/debian-policy/copyright-format-1.0.txt.gz", "normative"),
                              ("usr/share/doc/debian-policy/autopkgtest.txt.gz", "normative"),
                              ("usr/share/doc/debian-policy/menu-policy.txt.gz", "normative"),
                              ("usr/share/doc/debian-policy/perl-policy.txt.gz", "normative"),
                              ("usr/share/doc/debian-policy/policy.html/genindex.html", "normative"),
                              ("usr/share/doc/debian-policy/policy.html/index.html", "normative"))),
    Package("developers-reference", (("usr/share/developers-reference/*.html", "normative"),)),
    Package("base-files", tuple((f"usr/share/common-licenses/{name}", "license") for name in (
        "GPL-3", "GPL-2", "Apache-2.0", "MPL-2.0", "LGPL-2.1", "CC0-1.0", "Artistic", "GFDL-1.3"))),
    Package("debian-handbook", (("usr/share/doc/debian-handbook/html/en-US/*.html", "book"),)),
    Package("debian-reference-en", (("usr/share/debian-reference/*.en.html", "book"),)),
    Package("apache2-doc", tuple((f"usr/share/doc/apache2-doc/manual/en/mod/{name}.html", "html-manual") for name in (
        "core", "mpm_common", "mod_reqtimeout", "mod_cache", "mod_http2", "mod_ssl", "event", "mod_status"))),
    Package("haproxy-doc", (("usr/share/doc/haproxy/html/configuration.html", "html-manual"),
                            ("usr/share/doc/haproxy/html/management.html", "html-manual"))),
    Package("exim4-doc-html", (("usr/share/doc/exim4-doc-html/spec_html/ch-*.html", "html-manual"),)),
    Package("bind9-doc", (("usr/share/doc/bind9-doc/arm/reference.html", "html-manual"),
                          ("usr/share/doc/bind9-doc/arm/genindex.html", "html-manual"),
                          ("usr/share/doc/bind9-doc/arm/notes.html", "changelog"))),
    Package("redis-server", (("etc/redis/redis.conf", "annotated-config"),
                             ("usr/share/doc/redis-server/00-RELEASENOTES.gz", "changelog"))),
    Package("squid-common", (("usr/share/doc/squid-common/squid.conf.documented.gz", "annotated-config"),)),
    Package("php8.2-common", (("usr/lib/php/8.2/php.ini-production", "annotated-config"),)),
    Package("lvm2", (("etc/lvm/lvm.conf", "annotated-config"),)),
)
PACKAGES_BY_NAME = {package.name: package for package in PACKAGES}


@dataclass(frozen=True)
class Text:
    """One document as briefd reads it: `path` is "<package>/<file>" (a man page: "chrony/chrony.conf.5")."""

    path: str
    package: str
    genre: str
    title: str
    text: str


def text_root(cache: Path | None = None) -> Path:
    return (cache or cache_root()) / "vectors" / f"v{BUILD_VERSION}"


def build(names: tuple[str, ...] | None = None, cache: Path | None = None) -> list[Text]:
    """The texts of `names` (default: every package), made once and cached (text_root)."""
    names = tuple(names or PACKAGES_BY_NAME)
    unknown = [name for name in names if name not in PACKAGES_BY_NAME]
    if unknown:
        raise ValueError(f"unknown package(s) {', '.join(unknown)}; known: {', '.join(PACKAGES_BY_NAME)}")
    cache = cache or cache_root()
    root = text_root(cache)
    missing = [name for name in names if not (root / name / "index.json").exists()]
    debs = download(tuple(missing), cache) if missing else {}
    for name in missing:
        _build_package(PACKAGES_BY_NAME[name], debs[name], root / name)
    return [text for name in names for text in load_package(name, cache)]


def load_package(name: str, cache: Path | None = None) -> list[Text]:
    index = text_root(cache) / name / "index.json"
    return [Text(**item) for item in json.loads(index.read_text(encoding="utf-8"))]


def document(path: str, cache: Path | None = None) -> Text:
    """One built document by its path ("chrony/chrony.conf.5"); built first when it is not yet."""
    package = path.split("/", 1)[0]
    for text in build((package,), cache):
        if text.path == path:
            return text
    raise KeyError(f"no document {path}: `python -m lab.vectorset build --packages {package}` lists them")


def _build_package(package: Package, deb: Path, out: Path) -> None:
    with tempfile.TemporaryDirectory(prefix="vectorset-unpack-") as tmp:
        root = Path(tmp)
        subprocess.run(["dpkg-deb", "-x", str(deb), str(root)], check=True, capture_output=True, timeout=300)
        texts: list[Text] = []
        for path in sorted(root.rglob("*")):
            relative = path.relative_to(root).as_posix()
            genre = next((g for glob, g in package.keep if fnmatch.fnmatch(relative, glob)), None)
            if genre is None or not path.is_file() or path.is_symlink():
                continue
            made = read_text(path)
            if made is not None:
                title, text = made
                name = path.name.removesuffix(".gz")
                texts.append(Text(f"{package.name}/{name}", package.name, genre, title, text))
    out.mkdir(parents=True, exist_ok=True)
    for text in texts:
        (out / (text.path.split("/", 1)[1] + ".txt")).write_text(text.text, encoding="utf-8")
    (out / "index.json").write_text(json.dumps([t.__dict__ for t in texts]), encoding="utf-8")


def read_text(path: Path) -> tuple[str, str] | None:
    """(title, text) of one kept file as briefd's library reads it (documents.read_document): a man page
    rendered by groff first, as the real-document set renders them; None for a man page that is an alias."""
    from briefd.daemon.sources.documents import read_document
    from lab.docset import man_title

    data = path.read_bytes()
    name = path.name.removesuffix(".gz")
    if path.name.endswith(".gz"):
        data = gzip.decompress(data)
    if "/man/man" in path.as_posix():
        roff = data.decode("utf-8", "replace")
        if roff.lstrip().startswith(".so "):
            return None
        rendered = render_man(roff)
        page = read_document(rendered.encode(), None, name + ".txt", "text/plain")
        title = man_title(rendered, name)
    else:
        if name.endswith(".html.en"):
            name = name.removesuffix(".en")
        if not name.endswith((".html", ".txt")):
            name += ".txt"
        page = read_document(data, None, name, "text/html" if name.endswith(".html") else "text/plain")
        title = page.extracted.title if page else name
    if page is None:
        return None
    return title, page.extracted.text


# --------------------------------------------------------------------------- cases


def units(text: str) -> list[tuple[int, int, int, int]]:
    """Every citable unit of `text` as a run shows them to the model: cut into passages first
    (extract.split_passages), then each passage into units (citable.citable_spans). (start, end) of the unit and
    of its passage, offsets into `text`."""
    from briefd.daemon.sources.citable import citable_spans
    from briefd.daemon.sources.extract import split_passages

    return [(p.start + a, p.start + b, p.start, p.end)
            for p in split_passages(text) for a, b in citable_spans(p.text)]


def quote_for(doc: Text, needle: str) -> dict[str, str]:
    """The citable unit of `doc` holding `needle` (its first occurrence) and its context (the document's title,
    then the unit's passage), as a case wants them."""
    at = doc.text.find(needle)
    if at < 0:
        raise KeyError(f"{needle!r} is not in {doc.path}")
    for start, end, p_start, p_end in units(doc.text):
        if start <= at < end:
            return {"quote": doc.text[start:end], "context": f"{doc.title}\n{doc.text[p_start:p_end]}",
                    "url": f"file:///vectorset/{doc.path}"}
    raise KeyError(f"{needle!r} lies between units of {doc.path}")


def check_file(path: Path, cache: Path | None = None) -> list[str]:
    """What is wrong with a case file: every quote must be a span of its document's text, and of its context."""
    data = json.loads(path.read_text(encoding="utf-8"))
    problems: list[str] = []
    seen: set[str] = set()
    docs: dict[str, Text] = {}
    for case in data.get("cases", []):
        cid = case.get("id", "?")
        if cid in seen:
            problems.append(f"{cid}: id used twice")
        seen.add(cid)
        source = case.get("source") or {}
        doc_path = source.get("document", "")
        if doc_path not in docs:
            try:
                docs[doc_path] = document(doc_path, cache)
            except KeyError as exc:
                problems.append(f"{cid}: {exc}")
                continue
        doc = docs[doc_path]
        quote = case.get("quote", "")
        if not quote or quote not in doc.text:
            problems.append(f"{cid}: the quote is not a span of {doc_path}")
        if "context" in case and quote not in case["context"]:
            problems.append(f"{cid}: the quote is not in its context")
        if source.get("genre") != doc.genre:
            problems.append(f"{cid}: genre {source.get('genre')!r}, but {doc_path} is {doc.genre!r}")
    return problems


def split_halves(cases: list[dict[str, object]]) -> dict[str, list[dict[str, object]]]:
    """The cases cut into a dev half and a test half by project, once, before any rule changed (issue 27).

    A project's every case goes to one half, so no rule written from the dev half has read a sentence, a style
    or a setting of the test half's projects. Projects are grouped by the genre most of their cases have, and
    within each group, taken in the order of their name's SHA-256, they go to the halves in turn (the turn
    carried from group to group): both halves get every genre that has two projects or more, and about half
    the cases."""
    by_project: dict[str, list[dict[str, object]]] = {}
    for case in cases:
        source = case["source"]
        assert isinstance(source, dict)
        by_project.setdefault(str(source["package"]), []).append(case)

    def genre(project: str) -> str:
        genres = [str(c["source"]["genre"]) for c in by_project[project]]  # type: ignore[index]
        return max(sorted(set(genres)), key=genres.count)

    halves: dict[str, list[dict[str, object]]] = {"dev": [], "test": []}
    turn = 0
    for group in sorted({genre(p) for p in by_project}):
        members = sorted((p for p in by_project if genre(p) == group),
                         key=lambda p: hashlib.sha256(p.encode()).hexdigest())
        for project in members:
            halves[("dev", "test")[turn % 2]].extend(by_project[project])
            turn += 1
    return halves


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="The rule vectors' documents: build, read, check.")
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="download and make the texts (cached); print each document")
    b.add_argument("--packages", default="")
    u = sub.add_parser("units", help="a document's citable units, numbered as a model sees them")
    u.add_argument("document")
    q = sub.add_parser("quote", help="the unit holding TEXT, with its context, as JSON")
    q.add_argument("document")
    q.add_argument("needle")
    c = sub.add_parser("check", help="every case's quote a span of its document")
    c.add_argument("files", nargs="+", type=Path)
    args = parser.parse_args(argv)
    try:
        if args.command == "build":
            for text in build(tuple(n for n in args.packages.split(",") if n) or None):
                print(f"{text.path}\t{text.genre}\t{len(text.text)}\t{text.title}")
        elif args.command == "units":
            doc = document(args.document)
            print(f"TITLE: {doc.title}")
            passage = -1
            for n, (start, end, p_start, _) in enumerate(units(doc.text), start=1):
                if p_start != passage:
                    print(f"---- passage @{p_start}")
                    passage = p_start
                print(f"[U{n} @{start}] {doc.text[start:end]}")
        elif args.command == "quote":
            print(json.dumps(quote_for(document(args.document), args.needle), ensure_ascii=False, indent=1))
        else:
            bad = [problem for file in args.files for problem in check_file(file)]
            print("\n".join(bad) or "every quote is a span of its document")
            return 1 if bad else 0
    except (DocsetUnavailable, KeyError, ValueError) as exc:
        print(f"vectorset: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
