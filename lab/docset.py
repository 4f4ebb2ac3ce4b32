"""briefd's own real-document set: manuals the distribution ships, built at run time, served by the lab.

Why: the synthetic lab (lab/corpus.py) is one tidy paragraph a page, and real documentation is not:
navigation, definition lists whose term and definition are separate elements, tables, figures inside
formulas and command lines, units named in the subject. Issue 21 measured briefd on a held-out set
(SQLite, PostgreSQL, Python, R); this set uses other projects, so the two measure the same thing
independently.

The documents come from Debian's packages, downloaded with `apt-get download` (nothing is installed)
and unpacked with `dpkg-deb -x`; none of them is kept in git. Downloads are cached under
~/.cache/briefd-docset (or $DOCSET_CACHE), and so is each built corpus, so a re-run is offline and fast.
What is kept of each package (PACKAGES): HTML manuals as they are (Texinfo, AsciiDoc, the Lua manual),
PDFs (gunzipped where shipped as .pdf.gz), and man pages rendered to plain text with the distribution's
groff (one line a paragraph: no hyphenation, no wrapping).

The corpus is served twice, by the lab's own servers: through the real SearXNG over the datasette FTS
index (`start_docset_lab`: the files under the lab web's /docs/, one index row each), and as a library
folder for `egress = none` runs (`Docset.folder`).

    docset = build_docset(tmp / "docset")            # DocsetUnavailable when apt-get cannot download
    with start_docset_lab(tmp / "lab", docset) as lab:
        lab.searxng_url, docset.url(lab.web_port, "m4-doc/Dnl.html")

The questions are in lab/docset/questions.json (the eval set `briefd eval` reads: daemon/evaluate.py);
tests/labtests/test_docset.py checks that each states what the documents say.

Run alone: python -m lab.docset [--packages m4-doc,...] [--folder DIR] prints what was built.
"""

from __future__ import annotations

import argparse
import fnmatch
import gzip
import hashlib
import html
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from lab.servers import SearchLab

CACHE_ENV = "DOCSET_CACHE"  # not BRIEFD_*: briefd warns about BRIEFD_ variables it does not know
BUILD_VERSION = 1  # bump when the way documents are rendered changes: built corpora are cached by it
QUESTIONS = Path(__file__).resolve().parent / "docset" / "questions.json"
SLICE = Path(__file__).resolve().parent / "docset" / "slice.json"
# The second part's briefs, split by project into a dev half and a test half before any rule changed (issue 27):
# the test half is run end to end by `make bench` and never tuned on.
PART2_DEV = Path(__file__).resolve().parent / "docset" / "part2-dev.json"
PART2_TEST = Path(__file__).resolve().parent / "docset" / "part2-test.json"
SNIPPET_CHARS = 300
MAN_LINE_LENGTH = "1000n"  # groff's line length: a paragraph on one line, so nothing is hyphenated
BLOCK_TAGS = ("p", "div", "dt", "dd", "li", "tr", "td", "th", "h1", "h2", "h3", "h4", "h5", "h6", "pre", "br",
              "table", "blockquote")
DOCS_ROUTE = "/docs/"  # where the lab web serves the corpus (lab/web.py)


@dataclass(frozen=True)
class Package:
    """A Debian package and the files kept of it (globs under its root; man pages are rendered)."""

    name: str
    keep: tuple[str, ...]
    why: str
    part: int = 1  # 1: the set the rules were written against; 2: projects added after, split dev/test first


PACKAGES: tuple[Package, ...] = (
    Package("m4-doc", ("usr/share/doc/m4/*.html",),
            "GNU m4's Texinfo manual split in 105 small HTML pages with navigation (the CI slice: 120 KB)"),
    Package("git-doc", ("usr/share/doc/git-doc/*.html",),
            "git's AsciiDoc HTML: configuration variables as definition lists, defaults in prose"),
    Package("flex-doc", ("usr/share/doc/flex-doc/html/*.html", "usr/share/doc/flex-doc/flex.pdf.gz"),
            "flex's Texinfo manual as HTML and as a PDF: limits, table sizes, options"),
    Package("bash-doc", ("usr/share/doc/bash/bashref.html", "usr/share/doc/bash/bashref.pdf"),
            "the Bash reference manual: one long HTML page and its PDF (the same facts in both forms)"),
    Package("lua5.2-doc", ("usr/share/doc/lua5.2/manual.html",),
            "the Lua 5.2 reference manual: one long HTML page of the C API and the language"),
    Package("gnu-standards", ("usr/share/doc/gnu-standards/standards.html",
                              "usr/share/doc/gnu-standards/maintain.pdf.gz"),
            "the GNU coding standards (HTML) and information for maintainers (PDF)"),
    Package("openssh-client", ("usr/share/man/man1/*.1.gz", "usr/share/man/man5/*.5.gz"),
            "ssh, scp, ssh-keygen and ssh_config man pages: keyword = definition, 'The default is N.'"),
    Package("rsync", ("usr/share/man/man1/rsync.1.gz", "usr/share/man/man5/rsyncd.conf.5.gz"),
            "rsync and rsyncd.conf man pages: option defaults, sizes with suffixes"),
    Package("zstd", ("usr/share/man/man1/zstd.1.gz",),
            "the zstd man page: compression levels, window sizes in powers of two"),
    Package("curl", ("usr/share/man/man1/curl.1.gz",),
            "the curl man page: hundreds of options with defaults, figures in example command lines"),
    Package("wget", ("usr/share/man/man1/wget.1.gz",),
            "the wget man page: retries, timeouts, recursion depth"),
    Package("tar", ("usr/share/man/man1/tar.1.gz",),
            "the GNU tar man page: blocking factor and record sizes"),
    Package("manpages", ("usr/share/man/man5/*.5.gz", "usr/share/man/man7/*.7.gz"),
            "Linux man pages, sections 5 and 7: kernel limits, file formats, tables of constants"),
)
# The second part (issue 27): other projects' manuals, none of part 1's and none the rule vectors quote
# (lab/vectorset.py), its briefs split into a dev half and a frozen test half before any rule changed.
PART2: tuple[Package, ...] = (
    Package("openvpn", ("usr/share/man/man8/openvpn.8.gz",), "OpenVPN's man page: timers, windows, buffers", 2),
    Package("keepalived", ("usr/share/man/man5/keepalived.conf.5.gz",),
            "keepalived.conf(5): VRRP and health-check settings with defaults in a configuration grammar", 2),
    Package("varnish", ("usr/share/man/man1/varnishd.1.gz", "usr/share/man/man7/vcl-probe.7.gz",
                        "usr/share/man/man7/vcl-backend.7.gz"),
            "varnishd(1)'s run-time parameters (Default:, Minimum:, Maximum: lines) and VCL probes", 2),
    Package("mdadm", ("usr/share/man/man8/mdadm.8.gz", "usr/share/man/man5/mdadm.conf.5.gz",
                      "usr/share/man/man4/md.4.gz"), "mdadm, mdadm.conf and md(4): chunk sizes, RAID limits", 2),
    Package("cron", ("usr/share/man/man5/crontab.5.gz", "usr/share/man/man8/cron.8.gz"),
            "crontab(5) and cron(8): fields, ranges, times", 2),
    Package("nano", ("usr/share/man/man5/nanorc.5.gz", "usr/share/man/man1/nano.1.gz"),
            "nano and nanorc: editor options with defaults", 2),
    Package("mutt", ("usr/share/doc/mutt/html/configuration.html", "usr/share/doc/mutt/html/reference.html",
                     "usr/share/man/man5/muttrc.5.gz"),
            "mutt's HTML manual and muttrc(5): hundreds of variables, 'Default: N' in a table", 2),
    Package("iproute2", ("usr/share/man/man8/tc-tbf.8.gz", "usr/share/man/man8/tc-fq_codel.8.gz",
                         "usr/share/man/man8/tc-fq.8.gz", "usr/share/man/man8/ip-link.8.gz"),
            "tc queueing disciplines and ip-link: sizes with suffixes, rates, times in us/ms", 2),
    Package("util-linux", ("usr/share/man/man1/flock.1.gz", "usr/share/man/man8/agetty.8.gz",
                           "usr/share/man/man1/dmesg.1.gz", "usr/share/man/man8/fstrim.8.gz",
                           "usr/share/man/man8/hwclock.8.gz"), "util-linux man pages: timeouts, sizes", 2),
    Package("hdparm", ("usr/share/man/man8/hdparm.8.gz",), "hdparm(8): standby timeouts in units of 5 s", 2),
    Package("sysstat", ("usr/share/man/man5/sysstat.5.gz", "usr/share/man/man1/sar.sysstat.1.gz",
                        "usr/share/man/man8/sadc.8.gz"), "sysstat: history kept, intervals", 2),
    Package("rsyslog", ("usr/share/man/man5/rsyslog.conf.5.gz", "usr/share/man/man8/rsyslogd.8.gz"),
            "rsyslog.conf(5) and rsyslogd(8)", 2),
)
PACKAGES_BY_NAME = {package.name: package for package in PACKAGES + PART2}
PART_PACKAGES = {1: tuple(p.name for p in PACKAGES), 2: tuple(p.name for p in PART2)}
SLICE_PACKAGES = ("m4-doc",)


class DocsetUnavailable(RuntimeError):
    """The documents cannot be had here (apt-get cannot download, or no groff for the man pages)."""


@dataclass(frozen=True)
class Document:
    """One file of the corpus: its path under the corpus folder, its title, and its text (whitespace folded)."""

    path: str  # "m4-doc/Dnl.html", "openssh-client/ssh_config.5.txt"
    package: str
    kind: str  # html, pdf, man
    title: str
    text: str


@dataclass(frozen=True)
class Docset:
    """A built corpus: the folder (a library folder as it is) and its documents."""

    folder: Path
    documents: tuple[Document, ...]
    packages: tuple[str, ...]
    download_bytes: int

    def url(self, web_port: int, path: str) -> str:
        """Where the lab web serves a document."""
        return f"http://127.0.0.1:{web_port}{DOCS_ROUTE}{path}"

    def rows(self, web_port: int) -> list[dict[str, object]]:
        """The search index's rows (lab/search_index.py's `pages` table), one a document."""
        return [
            {"id": number, "title": doc.title, "url": self.url(web_port, doc.path), "content": doc.text,
             "snippet": snippet_of(doc), "slug": doc.path, "topic": doc.package, "kind": doc.kind,
             "host": "127.0.0.1", "published": ""}
            for number, doc in enumerate(self.documents, start=1)
        ]

    def where(self, substring: str) -> list[Document]:
        """The documents whose path contains `substring` (an eval case's `where`)."""
        return [doc for doc in self.documents if substring in doc.path]

    @property
    def corpus_bytes(self) -> int:
        return sum(f.stat().st_size for f in self.folder.rglob("*") if f.is_file())


def fold(text: str) -> str:
    """Whitespace folded to single spaces, as the eval folds a text before matching its patterns."""
    return re.sub(r"\s+", " ", text).strip()


def snippet_of(doc: Document) -> str:
    """What a search result shows: the document's first words after its title, as a web engine would."""
    text = doc.text
    if text.startswith(doc.title):
        text = text[len(doc.title):].lstrip()
    return text[:SNIPPET_CHARS]


def cache_root() -> Path:
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "briefd-docset")


# --------------------------------------------------------------------------- download


def download(names: tuple[str, ...], cache: Path) -> dict[str, Path]:
    """Each package's .deb in `cache/debs`, downloaded with `apt-get download` when not there yet.

    `apt-get update` runs once, only when a download fails (a fresh machine has no package lists).
    Raises DocsetUnavailable, naming the packages and apt-get's words, when they cannot be had."""
    debs = cache / "debs"
    debs.mkdir(parents=True, exist_ok=True)
    missing = [name for name in names if _cached_deb(debs, name) is None]
    if missing:
        if shutil.which("apt-get") is None:
            raise DocsetUnavailable(f"no apt-get on this machine to download {', '.join(missing)} "
                                    "(the docset needs Debian's documentation packages)")
        if _apt_download(missing, debs) != 0:
            subprocess.run(["apt-get", "update", "-qq"], capture_output=True, text=True, timeout=600)
            if _apt_download(missing, debs) != 0:
                raise DocsetUnavailable(f"apt-get download {' '.join(missing)} failed: {_last_apt_error(debs)}")
    found = {name: _cached_deb(debs, name) for name in names}
    lost = [name for name, path in found.items() if path is None]
    if lost:
        raise DocsetUnavailable(f"apt-get download left no .deb for {', '.join(lost)} in {debs}")
    return {name: path for name, path in found.items() if path is not None}


def _cached_deb(debs: Path, name: str) -> Path | None:
    candidates = sorted(debs.glob(f"{name}_*.deb"))
    return candidates[-1] if candidates else None


def _apt_download(names: list[str], debs: Path) -> int:
    # apt-get downloads as the `_apt` user where it can write the folder, else as root with a warning
    result = subprocess.run(["apt-get", "download", *names], cwd=debs, capture_output=True, text=True, timeout=600)
    (debs / ".last-apt-error").write_text(result.stderr, encoding="utf-8")
    return result.returncode


def _last_apt_error(debs: Path) -> str:
    try:
        lines = [line for line in (debs / ".last-apt-error").read_text().splitlines() if line.startswith("E:")]
    except OSError:
        return "no message"
    return " ".join(lines[-2:]) or "no message"


# --------------------------------------------------------------------------- build


def build_docset(folder: Path | None = None, packages: tuple[str, ...] | None = None,
                 cache: Path | None = None) -> Docset:
    """The corpus of `packages` (default: every one in PACKAGES), built once and cached.

    `folder`: where the corpus is wanted (a copy of the cached one; a library folder the caller may
    change); None: the cached corpus itself. Raises DocsetUnavailable when it cannot be built here."""
    names = tuple(packages or PART_PACKAGES[1])
    unknown = [name for name in names if name not in PACKAGES_BY_NAME]
    if unknown:
        raise ValueError(f"unknown docset package(s) {', '.join(unknown)}; known: {', '.join(PACKAGES_BY_NAME)}")
    cache = cache or cache_root()
    debs = download(names, cache)
    key = hashlib.sha256(json.dumps([BUILD_VERSION, sorted(p.name for p in debs.values())]).encode()).hexdigest()
    built = cache / "corpus" / key[:16]
    index = built / "docset.json"
    if not index.exists():
        _build(built, names, debs)
    docset = _load(index, built / "docs")
    if folder is None:
        return docset
    if folder.exists():
        shutil.rmtree(folder)
    shutil.copytree(docset.folder, folder)
    return Docset(folder, docset.documents, docset.packages, docset.download_bytes)


def _build(built: Path, names: tuple[str, ...], debs: dict[str, Path]) -> None:
    """Unpack, keep, render and index into a fresh `built`, made whole before it is named (a crash
    half-way leaves no corpus that looks built)."""
    built.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".building-", dir=built.parent))
    try:
        docs = staging / "docs"
        documents: list[Document] = []
        for name in names:
            documents.extend(_build_package(PACKAGES_BY_NAME[name], debs[name], docs))
        index = {"packages": list(names), "download_bytes": sum(p.stat().st_size for p in debs.values()),
                 "documents": [asdict(doc) for doc in documents]}
        (staging / "docset.json").write_text(json.dumps(index), encoding="utf-8")
        try:
            staging.rename(built)
        except OSError:
            if not (built / "docset.json").exists():  # not another build of the same corpus that finished first
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _load(index: Path, folder: Path) -> Docset:
    data = json.loads(index.read_text(encoding="utf-8"))
    documents = tuple(Document(**doc) for doc in data["documents"])
    return Docset(folder, documents, tuple(data["packages"]), int(data["download_bytes"]))


def _build_package(package: Package, deb: Path, docs: Path) -> list[Document]:
    with tempfile.TemporaryDirectory(prefix="docset-unpack-") as tmp:
        root = Path(tmp)
        subprocess.run(["dpkg-deb", "-x", str(deb), str(root)], check=True, capture_output=True, timeout=300)
        out = docs / package.name
        out.mkdir(parents=True, exist_ok=True)
        documents = []
        for source in _kept_files(root, package.keep):
            document = _render(package.name, source, out)
            if document is not None:
                documents.append(document)
        return documents


def _kept_files(root: Path, keep: tuple[str, ...]) -> list[Path]:
    """Regular files (not links: Debian links man page aliases) matching a glob of `keep`, sorted."""
    found = []
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root).as_posix()
        if path.is_file() and not path.is_symlink() and any(fnmatch.fnmatch(relative, g) for g in keep):
            found.append(path)
    return found


def _render(package: str, source: Path, out: Path) -> Document | None:
    """Copy (or render) one kept file into `out`; its Document, or None for a man page that is only an alias."""
    name = source.name
    if name.endswith(".pdf.gz"):
        target = out / name.removesuffix(".gz")
        target.write_bytes(gzip.decompress(source.read_bytes()))
        return _document(package, target, "pdf", *pdf_text(target))
    if name.endswith(".pdf"):
        target = out / name
        shutil.copyfile(source, target)
        return _document(package, target, "pdf", *pdf_text(target))
    if name.endswith(".html"):
        target = out / name
        shutil.copyfile(source, target)
        return _document(package, target, "html", *html_text(target.read_bytes()))
    roff = gzip.decompress(source.read_bytes()).decode("utf-8", "replace")
    if re.match(r"\s*\.so\s", roff):
        return None  # ".so man7/other.7": an alias of another page
    text = render_man(roff)
    target = out / (name.removesuffix(".gz") + ".txt")
    target.write_text(text, encoding="utf-8")
    return _document(package, target, "man", man_title(text, name), text)


def _document(package: str, target: Path, kind: str, title: str, text: str) -> Document:
    return Document(f"{package}/{target.name}", package, kind, fold(title), fold(text))


def render_man(roff: str) -> str:
    """A man page as plain text by the distribution's groff: tables (tbl) laid out, no bold or underline
    overstrikes, no hyphenation (one line a paragraph), so every sentence can be quoted as it reads."""
    groff = shutil.which("groff")
    if groff is None:
        raise DocsetUnavailable("no groff to render the man pages: apt-get install groff-base")
    result = subprocess.run([groff, "-t", "-mandoc", "-Tutf8", f"-rLL={MAN_LINE_LENGTH}", "-P-cbou"],
                            input=roff, capture_output=True, text=True, timeout=120)
    return result.stdout


def man_title(text: str, name: str) -> str:
    """"ssh_config — OpenSSH client configuration file": the NAME section's line, else the file's name."""
    match = re.search(r"^NAME\s*\n\s+(.+)$", text, re.MULTILINE)
    return match.group(1).strip() if match else name.removesuffix(".gz")


def html_text(data: bytes) -> tuple[str, str]:
    """(title, text) of an HTML manual page: <title> (else the first h1), and every text node, scripts
    and styles left out. Plain on purpose: it is the documents' truth that the questions are checked
    against, not briefd's extraction (which eval measures)."""
    import lxml.html

    tree = lxml.html.document_fromstring(data)
    for bad in tree.xpath("//script|//style"):
        bad.drop_tree()
    for element in tree.iter(*BLOCK_TAGS):  # a term and its definition, two cells: not run together
        element.tail = "\n" + (element.tail or "")
    title = tree.findtext(".//title") or ""
    if not title.strip():
        heading = tree.find(".//h1")
        title = heading.text_content() if heading is not None else ""
    return html.unescape(title.strip()), tree.text_content()


def pdf_text(path: Path) -> tuple[str, str]:
    """(title, text) of a PDF: its metadata's Title (else its file name), and every page's text."""
    import pypdfium2 as pdfium

    pdf = pdfium.PdfDocument(path)
    try:
        title = str(pdf.get_metadata_dict().get("Title") or "").strip() or PurePosixPath(path.name).stem
        pages = []
        for index in range(len(pdf)):
            page = pdf[index]
            textpage = page.get_textpage()
            pages.append(textpage.get_text_range())
            textpage.close()
            page.close()
        return title, "\n".join(pages)
    finally:
        pdf.close()


# --------------------------------------------------------------------------- serve


def start_docset_lab(workdir: Path, docset: Docset, probe: str | None = None) -> SearchLab:
    """The lab's real search stack over the docset: its files under the lab web's /docs/, an index row
    each in datasette, the real SearXNG in front. `probe`: a query that must find documents before this
    returns (default: the first document's title)."""
    from lab.servers import start_search_lab

    return start_search_lab(workdir, docs=docset.folder, rows=docset.rows,
                            probe=probe or docset.documents[0].title)


# --------------------------------------------------------------------------- the questions


def load_cases(path: Path = QUESTIONS) -> dict[str, object]:
    data: dict[str, object] = json.loads(path.read_text(encoding="utf-8"))
    return data


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Build briefd's real-document set from Debian's packages.")
    parser.add_argument("--packages", default="", help="comma-separated (default: all of PACKAGES)")
    parser.add_argument("--part", type=int, choices=sorted(PART_PACKAGES), default=None,
                        help="every package of one part of the set (1: the first set; 2: the projects added after)")
    parser.add_argument("--folder", type=Path, default=None, help="copy the corpus here (default: the cache)")
    args = parser.parse_args(argv)
    names = tuple(n for n in args.packages.split(",") if n) or (PART_PACKAGES[args.part] if args.part else None)
    try:
        docset = build_docset(args.folder, names)
    except DocsetUnavailable as exc:
        print(f"docset: {exc}", file=sys.stderr)
        return 2
    kinds: dict[str, int] = {}
    for doc in docset.documents:
        kinds[doc.kind] = kinds.get(doc.kind, 0) + 1
    print(json.dumps({"folder": str(docset.folder), "documents": len(docset.documents), "kinds": kinds,
                      "download_bytes": docset.download_bytes, "corpus_bytes": docset.corpus_bytes}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
