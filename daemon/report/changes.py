"""What changed since the previous run of the same id (issue 12, part 5): report.json's `changes`.

A brief asked again (by hand, or on its schedule) is read by someone who saw the last answer:
what they need first is the difference. This module compares the previous run's report.json
(as the store kept it: Store.previous_report) with the new one and says, in data, what moved:

- the range (final low/high and unit), with why: the new run's evidence that is new and carries
  a figure that moves a bound, and the previous run's such evidence that is gone;
- the verdict (value or evidence level), with the new evidence that takes a side;
- the sources: new, gone, or changed (the same URL whose page text hash differs: the page was
  edited since the previous run read it);
- the quotes: added or withdrawn, by URL and quote text (whitespace runs folded, so a page
  re-extracted with other line breaks is not a change); a quote of the same page that differs in
  a few words (a figure updated: "9 seconds" → "12 seconds") is one quote `edited`, with its
  word-level difference, not the same text added and withdrawn (a report cuts quotes to about
  150 characters, so a figure changed at the end of a long quote showed as no difference at all);
- the question, when the id was resubmitted with another one.

Pure: two dicts in, one dict out; the worker does the store and outbox reads, changes_md.py the
rendering. A report from an older briefd lacks keys (no `text_sha256` on its sources, no
`impact` on its evidence): what cannot be compared is not called a change.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from typing import Any

from ..core.untrusted import as_dict, as_list, fold
from ..rules.numbers import finite

SIDES = frozenset({"supports", "contradicts"})  # a quote that bears on a verdict takes one
NO_BEARING = "neutral"  # an estimate quote's impact that moves no bound


_dict = as_dict


def _dicts(value: Any) -> list[dict[str, Any]]:
    return [dict(v) for v in as_list(value) if isinstance(v, Mapping)]


_number = finite  # a figure of a report.json: NaN and inf (a hand-edited or damaged file) are no figure


def quote_key(item: Mapping[str, Any]) -> tuple[str, str]:
    """What makes two evidence items the same quote: its page and its text, whitespace folded."""
    return fold(item.get("url")), fold(item.get("quote"))


def _titles(report: Mapping[str, Any]) -> dict[str, str]:
    """URL → the title the report shows for it (its source entry, else its evidence)."""
    titles = {fold(e.get("url")): fold(e.get("title")) for e in _dicts(report.get("evidence"))}
    titles.update({fold(s.get("url")): fold(s.get("title")) for s in _dicts(report.get("sources"))})
    return titles


def _ref(item: Mapping[str, Any], titles: Mapping[str, str], *, numbered: bool) -> dict[str, Any]:
    """An evidence item as `changes` names it: its source number (the current report's only:
    the previous report's numbers mean nothing here), page, title and quote."""
    url = fold(item.get("url"))
    ref: dict[str, Any] = {"source": item.get("source") if numbered else None, "url": url,
                           "title": titles.get(url) or fold(item.get("title")) or url, "quote": item.get("quote")}
    if _number(item.get("low")) is not None:
        ref.update(low=item.get("low"), high=item.get("high"))
    if item.get("stance") in SIDES:
        ref["stance"] = item.get("stance")
    return ref


def _unique(items: Iterable[dict[str, Any]], but: set[tuple[str, str]]) -> list[dict[str, Any]]:
    """Items whose quote is not in `but`, each quote once, in report order."""
    seen = set(but)
    out = []
    for item in items:
        key = quote_key(item)
        if key not in seen:
            seen.add(key)
            out.append(item)
    return out


EDITED_SIMILARITY = 0.6  # the share of words two quotes of one page keep for one to be the other, edited


def word_diff(old: str, new: str) -> list[dict[str, str]]:
    """The word-level difference of two texts, in order: runs of words kept (`=`), removed (`-`)
    and added (`+`), each run's words joined by single spaces."""
    a, b = old.split(), new.split()
    runs: list[dict[str, str]] = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if op == "equal":
            runs.append({"op": "=", "text": " ".join(a[i1:i2])})
            continue
        if i2 > i1:
            runs.append({"op": "-", "text": " ".join(a[i1:i2])})
        if j2 > j1:
            runs.append({"op": "+", "text": " ".join(b[j1:j2])})
    return runs


def similarity(old: str, new: str) -> float:
    """The share of their words two texts keep in the same order (difflib's ratio over words)."""
    return difflib.SequenceMatcher(None, old.split(), new.split(), autojunk=False).ratio()


def _edits(withdrawn: list[dict[str, Any]], added: list[dict[str, Any]]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """Pairs (old, new) of one page's quotes that are the same quote edited: each new quote with
    the most similar old one of its page at EDITED_SIMILARITY or more, each quote in one pair."""
    pairs: list[tuple[dict[str, Any], dict[str, Any]]] = []
    left = list(withdrawn)
    for item in added:
        url, text = quote_key(item)
        scored = [(similarity(quote_key(o)[1], text), i) for i, o in enumerate(left) if quote_key(o)[0] == url]
        best = max(scored, default=None)
        if best is not None and best[0] >= EDITED_SIMILARITY:
            pairs.append((left.pop(best[1]), item))
    return pairs


def quote_changes(previous: Mapping[str, Any], current: Mapping[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """Quotes the new run found that the previous did not (`added`), the reverse (`withdrawn`),
    and one page's quotes that are the same quote with some words changed (`edited`: the new
    quote's reference, its `old_quote` and the word-level `diff`)."""
    old, new = _dicts(previous.get("evidence")), _dicts(current.get("evidence"))
    old_keys, new_keys = {quote_key(e) for e in old}, {quote_key(e) for e in new}
    old_titles, new_titles = _titles(previous), _titles(current)
    added, withdrawn = _unique(new, old_keys), _unique(old, new_keys)
    pairs = _edits(withdrawn, added)
    paired = {id(item) for pair in pairs for item in pair}
    return {"added": [_ref(e, new_titles, numbered=True) for e in added if id(e) not in paired],
            "withdrawn": [_ref(e, old_titles, numbered=False) for e in withdrawn if id(e) not in paired],
            "edited": [_edited(o, e, new_titles) for o, e in pairs]}


def _edited(old: Mapping[str, Any], new: Mapping[str, Any], titles: Mapping[str, str]) -> dict[str, Any]:
    """A quote edited since the previous run: the new one's reference, the old text, the word-level diff."""
    return {**_ref(new, titles, numbered=True), "old_quote": old.get("quote"),
            "diff": word_diff(quote_key(old)[1], quote_key(new)[1])}


def source_changes(previous: Mapping[str, Any], current: Mapping[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """Sources by URL: `new`, `gone`, and `changed` (in both, both with a page text hash, and the
    hashes differ). A source without a hash (an older report, a snippet, a library document that
    left the index) is never called changed: there is nothing to compare."""
    old = {fold(s.get("url")): s for s in _dicts(previous.get("sources"))}
    new = {fold(s.get("url")): s for s in _dicts(current.get("sources"))}

    def entry(source: Mapping[str, Any], *, numbered: bool = True) -> dict[str, Any]:
        return {"n": source.get("n") if numbered else None, "url": fold(source.get("url")),
                "title": fold(source.get("title")) or fold(source.get("url"))}

    changed = [{**entry(s), "old_text_sha256": old[url]["text_sha256"], "new_text_sha256": s["text_sha256"]}
               for url, s in new.items()
               if url in old and s.get("text_sha256") and old[url].get("text_sha256")
               and s["text_sha256"] != old[url]["text_sha256"]]
    return {"new": [entry(s) for url, s in new.items() if url not in old],
            "gone": [entry(s, numbered=False) for url, s in old.items() if url not in new],
            "changed": changed}


def _final(report: Mapping[str, Any]) -> tuple[dict[str, Any] | None, str]:
    """The estimate's final range ({low, high} as stored, or None without one) and its unit."""
    estimate = _dict(report.get("estimate"))
    final = _dict(estimate.get("final"))
    numeric = _number(final.get("low")) is not None and _number(final.get("high")) is not None
    return ({"low": final["low"], "high": final["high"]} if numeric else None), fold(estimate.get("unit"))


def _bounds(final: Mapping[str, Any] | None) -> tuple[float | None, float | None] | None:
    return (_number(final["low"]), _number(final["high"])) if final is not None else None


def _bears_on_range(item: Mapping[str, Any]) -> bool:
    """A quote that carries a figure and moves a bound (an older report without `impact`: any figure)."""
    return _number(item.get("low")) is not None and item.get("impact") != NO_BEARING


def range_change(previous: Mapping[str, Any], current: Mapping[str, Any]) -> dict[str, Any] | None:
    """The final range moved (or appeared, or went): old → new, because of which quotes; None if not."""
    (old, old_unit), (new, new_unit) = _final(previous), _final(current)
    if _bounds(old) == _bounds(new) and old_unit == new_unit:  # 400 and 400.0 are the same bound
        return None
    old_items, new_items = _dicts(previous.get("evidence")), _dicts(current.get("evidence"))
    old_keys, new_keys = {quote_key(e) for e in old_items}, {quote_key(e) for e in new_items}
    old_titles, new_titles = _titles(previous), _titles(current)
    added = [e for e in _unique(new_items, old_keys) if _bears_on_range(e)]
    gone = [e for e in _unique(old_items, new_keys) if _bears_on_range(e)]
    pairs = _edits(gone, added)  # a figure edited in its quote: one quote, its changed words shown
    paired = {id(item) for pair in pairs for item in pair}
    return {"old": old, "new": new, "old_unit": old_unit, "unit": new_unit,
            "because": [_ref(e, new_titles, numbered=True) for e in added if id(e) not in paired]
            + [_edited(o, e, new_titles) for o, e in pairs],
            "withdrawn": [_ref(e, old_titles, numbered=False) for e in gone if id(e) not in paired]}


def verdict_change(previous: Mapping[str, Any], current: Mapping[str, Any]) -> dict[str, Any] | None:
    """The verdict flipped or its evidence level changed: old → new, with the new quotes that take
    a side; None when both are the same (or neither report has one)."""
    old, new = _dict(previous.get("verdict")), _dict(current.get("verdict"))
    if (old.get("value"), old.get("evidence_level")) == (new.get("value"), new.get("evidence_level")):
        return None
    old_items, new_items = _dicts(previous.get("evidence")), _dicts(current.get("evidence"))
    old_keys, new_titles = {quote_key(e) for e in old_items}, _titles(current)
    return {"old": old.get("value"), "new": new.get("value"),
            "old_level": old.get("evidence_level"), "new_level": new.get("evidence_level"),
            "because": [_ref(e, new_titles, numbered=True)
                        for e in _unique(new_items, old_keys) if e.get("stance") in SIDES]}


def what_changed(previous: Mapping[str, Any], current: Mapping[str, Any], *, previous_run_id: int,
                 files: str | None) -> dict[str, Any]:
    """report.json's `changes`: the new report against the previous run's (`files`: where that
    run's files are now, relative to the report's folder, or None when they are not found)."""
    old_q, new_q = fold(previous.get("question")), fold(current.get("question"))
    changes: dict[str, Any] = {
        "since": previous.get("finished_at"),
        "previous": {"run_id": previous_run_id, "started_at": previous.get("started_at"),
                     "finished_at": previous.get("finished_at"), "files": files},
        "question": {"old": old_q, "new": new_q} if old_q != new_q else None,
        "range": range_change(previous, current),
        "verdict": verdict_change(previous, current),
        "sources": source_changes(previous, current),
        "quotes": quote_changes(previous, current),
    }
    changes["nothing_changed"] = nothing_changed(changes)
    return changes


def nothing_changed(changes: Mapping[str, Any]) -> bool:
    """No part of `changes` names a difference: the report says so in one line."""
    lists = [*_dict(changes.get("sources")).values(), *_dict(changes.get("quotes")).values()]
    return not any(changes.get(part) for part in ("question", "range", "verdict")) and not any(lists)
