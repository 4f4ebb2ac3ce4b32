"""report.md's "What changed since the previous run" section, from report.json's `changes` (changes.py).

A re-run opens with it, before the details: the range or verdict that moved and why, the
sources and quotes new, gone or edited, each list cut at CHANGES_SHOWN (report.json has them all).
"""

from __future__ import annotations

from typing import Any, Mapping

from ..core.schedule import parse_iso
from ..core.untrusted import as_dict as _dict, as_list as _list, fold, md_escape
from .markup import md_cite_link, md_code_span, md_link, md_num
from .report import is_int, range_text, short_quote, source_numbers


CHANGES_SHOWN = 5  # items a list of the section shows; report.json has them all
NOTHING_CHANGED = "Nothing changed: the same answer, from the same sources and quotes"


def changes_when(value: Any) -> str:
    """The previous run's date as the heading says it ("2026-11-20 09:00 UTC"), else as stored."""
    text = fold(value)
    try:
        moment = parse_iso(text)
    except ValueError:
        return text or "the previous run"
    return moment.strftime("%Y-%m-%d %H:%M UTC")


def _md_quote_ref(ref: Mapping[str, Any], known: set[int]) -> str:
    """A quote `changes` names: cited by its number in this report, else linked to its page."""
    n = ref.get("source")
    where = md_cite_link(n) if is_int(n) and n in known else md_link(ref.get("title"), ref.get("url"))
    return f"{where} “{md_escape(short_quote(ref.get('quote')))}”"


def _md_source_ref(ref: Mapping[str, Any], known: set[int]) -> str:
    n = ref.get("n")
    cite = f"{md_cite_link(n)} " if is_int(n) and n in known else ""
    return cite + md_link(ref.get("title"), ref.get("url"))


def _md_some(texts: list[str]) -> str:
    """At most CHANGES_SHOWN of the texts, then how many more there are."""
    more = len(texts) - CHANGES_SHOWN
    return "; ".join(texts[:CHANGES_SHOWN]) + (f"; and {more} more in report.json" if more > 0 else "")


def _md_why(label: str, refs: list[Any], known: set[int]) -> str:
    texts = [_md_quote_edit(_dict(r), known) if _dict(r).get("diff") else _md_quote_ref(_dict(r), known)
             for r in refs]
    return f"{label}: {_md_some(texts)}" if texts else ""


def _md_range_change(change: Mapping[str, Any], known: set[int]) -> str:
    """`400 – 460 → 410 – 440 t (because: [2] “…”; no longer: [title](url) “…”)`."""
    old_unit, unit = fold(change.get("old_unit")), fold(change.get("unit"))
    old = f"{range_text(change.get('old')) or 'none'} {old_unit if old_unit != unit else ''}".strip()
    new = f"{range_text(change.get('new')) or 'none'} {unit}".strip()
    why = [w for w in (_md_why("because", _list(change.get("because")), known),
                       _md_why("no longer", _list(change.get("withdrawn")), known)) if w]
    return f"**Range:** {md_escape(old)} → {md_escape(new)}" + (f" ({'; '.join(why)})" if why else "")


def _md_verdict_change(change: Mapping[str, Any], known: set[int]) -> str:
    def side(value: Any, level: Any) -> str:
        return f"{md_escape(value) or 'none'} ({md_escape(level) or 'no level'})"

    why = _md_why("because", _list(change.get("because")), known)
    return (f"**Verdict:** {side(change.get('old'), change.get('old_level'))} → "
            f"{side(change.get('new'), change.get('new_level'))}" + (f" ({why})" if why else ""))


def _md_change_items(changes: Mapping[str, Any], known: set[int]) -> list[str]:
    """The section's bullets, answer first: question, range, verdict, sources, quotes."""
    items = []
    question = _dict(changes.get("question"))
    if question:
        items.append(f"**Question:** “{md_escape(question.get('old'))}” → "
                     f"“{md_escape(question.get('new'))}”")
    if _dict(changes.get("range")):
        items.append(_md_range_change(_dict(changes.get("range")), known))
    if _dict(changes.get("verdict")):
        items.append(_md_verdict_change(_dict(changes.get("verdict")), known))
    sources, quotes = _dict(changes.get("sources")), _dict(changes.get("quotes"))
    for label, refs in (("New sources", sources.get("new")), ("Sources gone", sources.get("gone")),
                        ("Sources changed (the page's text differs from the previous read)", sources.get("changed"))):
        if _list(refs):
            items.append(f"**{label}:** " + _md_some([_md_source_ref(_dict(r), known) for r in _list(refs)]))
    for label, refs in (("Quotes added", quotes.get("added")), ("Quotes withdrawn", quotes.get("withdrawn"))):
        if _list(refs):
            items.append(f"**{label}:** " + _md_some([_md_quote_ref(_dict(r), known) for r in _list(refs)]))
    if _list(quotes.get("edited")):
        items.append("**Quotes edited:** " + _md_some([_md_quote_edit(_dict(r), known)
                                                       for r in _list(quotes.get("edited"))]))
    return items


EDIT_CONTEXT_WORDS = 6  # words kept on each side of a change in a quote "What changed" shows edited


def _md_quote_edit(ref: Mapping[str, Any], known: set[int]) -> str:
    """A quote edited since the previous run, where its words changed: `“… after **9 → 12** seconds”`,
    the unchanged words around each change cut to EDIT_CONTEXT_WORDS a side."""
    n = ref.get("source")
    where = md_cite_link(n) if is_int(n) and n in known else md_link(ref.get("title"), ref.get("url"))
    runs = [_dict(r) for r in _list(ref.get("diff"))]
    return f"{where} “{' '.join(_md_diff_pieces(runs))}”"


def _context(words: list[str], k: int, *, before: bool, after: bool) -> list[str]:
    """Unchanged words of an edited quote: k next to a change `before` them (their first k) and k
    next to one `after` them (their last k), the rest an ellipsis."""
    if len(words) <= k * (before + after) or not (before or after):
        return words
    head, tail = (words[:k] if before else []), (words[-k:] if after else [])
    return [*head, "…", *tail]


def _md_diff_pieces(runs: list[dict[str, Any]]) -> list[str]:
    """The pieces of an edited quote as report.md writes them: kept words (cut around the changes),
    a replacement as `**old → new**`, words only removed or only added said so."""
    pieces: list[str] = []
    k = EDIT_CONTEXT_WORDS
    for i, run in enumerate(runs):
        op, words = run.get("op"), fold(run.get("text")).split()
        if op == "=":
            pieces.append(md_escape(" ".join(_context(words, k, before=i > 0, after=i < len(runs) - 1))))
        elif op == "-" and i + 1 < len(runs) and _dict(runs[i + 1]).get("op") == "+":
            pieces.append(f"**{md_escape(' '.join(words))} → {md_escape(fold(_dict(runs[i + 1]).get('text')))}**")
        elif op == "-":
            pieces.append(f"**(removed: {md_escape(' '.join(words))})**")
        elif op == "+" and not (i > 0 and _dict(runs[i - 1]).get("op") == "-"):
            pieces.append(f"**(added: {md_escape(' '.join(words))})**")
    return [p for p in pieces if p]


def md_changes(report: Mapping[str, Any]) -> list[str]:
    """The "What changed since <date>" section a re-run opens with; nothing on a first run."""
    changes = _dict(report.get("changes"))
    if not changes:
        return []
    lines = [f"## What changed since {md_escape(changes_when(changes.get('since')))}", ""]
    files = fold(_dict(changes.get("previous")).get("files"))
    where = f"previous run's files: {md_code_span(files)}" if files else ""
    items = [] if changes.get("nothing_changed") else _md_change_items(changes, source_numbers(report))
    if not items:
        # what "the same sources" rests on: the pages' servers were asked (a re-run checks them)
        checked = _dict(report.get("usage")).get("pages_not_modified")
        said = f"; {md_num(checked)} page{'' if checked == 1 else 's'} checked with their servers, unchanged" \
            if is_int(checked) and checked else ""
        return lines + [NOTHING_CHANGED + said + (f" ({where})." if where else "."), ""]
    return lines + [f"- {item}" for item in items] + [""] + ([f"_The {where}_", ""] if where else [])
