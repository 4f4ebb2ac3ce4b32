"""The numeric decisions for estimates and verdicts: pure, typed, no I/O.

The model proposes labels and numbers; the rules decide. Which figure a quote states is figures.py's (and
contracts.py's for a claim); here, from the figures kept: the estimate's range, its progress score, when to
stop, which bound to research next, the source tiers, and a hypothesis's verdict, each computed by a rule
written down in this file, so each can be checked with a table of cases.

Numbers used below (the worked examples are repeated as tests):
  CREDIBLE = 0.5    readings and stances below this confidence never move anything
  TRIM = 0.1        each bound trims the outer 10 % of credible weight
  PLAUSIBLE = 10    a positive estimate ignores lone readings 10x outside the brief's range
  CORROBORATION = 2   independent credible sources: only they narrow a bound to the evidence, and a
                      range meets its target only with that many inside it
  ONE_SOURCE_KEEPS = 0.05   one source moves a bound by its confidence, never all the way
  SUPPORT_NEEDED = 1.2, DOMINANCE = 2.0   the verdict rule's thresholds
  ONE_SOURCE_TIERS = ("regulator",)   one such source decides a contract, or settles a range, alone where no
                                      credible quote disagrees (contract_verdict, settled_by)
  MODEL_TIER_CEILING = "industry"   the highest tier the model's label alone gives a page

A hypothesis verdict is `deterministic` only when computed from a contract (contract_verdict:
figures read from the quotes against a target); from the model's stance labels it is
`advisory` (verdict).
"""

from __future__ import annotations

import math
import re
import sys
from dataclasses import dataclass, replace
from typing import Iterable, Sequence
from urllib.parse import unquote, urlsplit

from .amounts import SAME_FIGURE, tidy
from .contracts import Contract, FAILS, MEETS, quote_stance
from .numbers import number_text



TIERS: tuple[str, ...] = ("regulator", "peer_reviewed", "industry", "news", "social")


TIER_CAPS: dict[str, float] = {
    "regulator": 0.95, "peer_reviewed": 0.85, "industry": 0.7, "news": 0.6, "social": 0.3,
}


_TIER_ALIASES: dict[str, str] = {
    "regulatory": "regulator", "government": "regulator", "official": "regulator", "auditor": "regulator",
    "peer-reviewed": "peer_reviewed", "peer reviewed": "peer_reviewed", "peerreviewed": "peer_reviewed",
    "academic": "peer_reviewed", "journal": "peer_reviewed", "scientific": "peer_reviewed",
    "trade": "industry", "company": "industry", "press": "news", "media": "news",
    "forum": "social", "blog": "social", "anonymous": "social", "social_media": "social", "unreliable": "social",
}


CREDIBLE = 0.5


def normalize_tier(tier: str | None) -> str:
    """One of TIERS; a label the model made up (or none) counts as news: neither trusted nor dismissed."""
    if not isinstance(tier, str):
        return "news"
    key = " ".join(tier.strip().lower().split())
    if key.replace(" ", "_") in TIER_CAPS:
        return key.replace(" ", "_")
    return _TIER_ALIASES.get(key, _TIER_ALIASES.get(key.replace(" ", "_"), "news"))


def tier_confidence(tier: str | None, model_confidence: float) -> float:
    """The model's confidence, capped by the source's tier: a forum post cannot be 0.9 sure."""
    try:
        c = float(model_confidence)
    except (TypeError, ValueError):
        c = 0.0
    c = 0.0 if math.isnan(c) else min(1.0, max(0.0, c))
    return min(c, TIER_CAPS[normalize_tier(tier)])


# The model's word alone never makes a page a regulator or a peer-reviewed source: a news
# story quoting an auditor is not the auditor. Without an organisation's source_tiers rule,
# those two tiers need the page's host to agree (a government host for regulator, an
# academic or government one for peer_reviewed); otherwise the tier is capped at
# MODEL_TIER_CEILING, the highest a page can reach on the model's label alone.
MODEL_TIER_CEILING = "industry"


_GOV_HOST = re.compile(r"(?:^|\.)(?:(?:gov|mil)(?:\.[a-z]{2})?|(?:gouv|gob|go|govt|gv)\.[a-z]{2}|europa\.eu|int)$")


_ACADEMIC_HOST = re.compile(r"(?:^|\.)(?:edu(?:\.[a-z]{2})?|ac\.[a-z]{2})$")


def _host(url: str) -> str:
    try:
        return (urlsplit(url).hostname or "").lower().rstrip(".")
    except ValueError:
        return ""


def independent_source(url: str) -> str:
    """Which source a page counts as wherever sources are counted (an estimate's corroboration, a verdict's
    domains): a library document's folder, an archive (`zim://<archive>/...`), a web page itself. One
    manual's pages (its HTML and its PDF, git-config.html and git-gc.html) or one archive's articles say
    one publisher's word once: they are one source, not two that agree. A web page stays its own source:
    briefd cannot tell one publisher's sites or sections from a host name, and a host serves many
    publishers (a mirror, a hosting service; the lab serves every site from two loopback names)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    if parts.scheme == FILE_SCHEME:
        return "file://" + unquote(parts.path).rsplit("/", 1)[0] + "/"
    if parts.scheme == ARCHIVE_SCHEME:
        return f"{parts.scheme}://{parts.netloc}/"
    return url


def _under_prefix(url: str, prefix: str) -> bool:
    """`url` is `prefix` or lies below it: same scheme and host (any case), the path continuing
    at a "/" ("https://x.org/audits" covers /audits/2024 but not /audits-old)."""
    try:
        u, p = urlsplit(url), urlsplit(prefix)
    except ValueError:
        return False
    if (u.scheme.lower(), u.netloc.lower()) != (p.scheme.lower(), p.netloc.lower()):
        return False
    rest = f"{u.path}{'?' + u.query if u.query else ''}"
    path = p.path or "/"
    if not (rest or "/").startswith(path):
        return False
    tail = (rest or "/")[len(path):]
    return path.endswith("/") or not tail or tail[0] in "/?#"


# A source_tiers key may also name where a document lives (core/settings.py makes it an absolute
# path): a library folder or file covers the file:// URLs at or under it (the library's documents
# are read at the paths under the configured folder, daemon/sources/library.py), and a Kiwix
# archive file covers its zim://<file name>/... articles (an article's URL names its archive by
# file name alone, daemon/sources/archives.py). Without such a rule a library document is
# unrated: its tier is the model's label, so the product's own manual weighed like a news story.
FILE_SCHEME, ARCHIVE_SCHEME = "file", "zim"


def is_path_key(key: str) -> bool:
    """True for a source_tiers key that names a folder or a file (settings stores those absolute)."""
    return key.startswith("/")


def _path_of(url: str, scheme: str) -> str | None:
    """The decoded path of a file:// URL, or the archive file name of a zim:// URL; else None."""
    try:
        split = urlsplit(url)
    except ValueError:
        return None
    if split.scheme.lower() != scheme:
        return None
    return unquote(split.netloc if scheme == ARCHIVE_SCHEME else split.path)


def _covers_path(url: str, key: str) -> bool:
    """`key` (an absolute path) is the document's file or a folder above it, or the archive it is in."""
    document = _path_of(url, FILE_SCHEME)
    if document is not None:
        folder = key.rstrip("/") or "/"
        return document == folder or document.startswith(folder.rstrip("/") + "/")
    archive = _path_of(url, ARCHIVE_SCHEME)
    return archive is not None and archive == key.rstrip("/").rpartition("/")[2]


def tier_rule(url: str, source_tiers: Sequence[tuple[str, str]]) -> tuple[str, str] | None:
    """The `source_tiers` rule (key, tier) that sets `url`'s tier, or None when none covers it (unrated).

    A key with "://" is a URL prefix, a key that is a path a library folder, document or
    archive file (is_path_key), any other a host that also covers its subdomains (as
    include_domains does). The most specific rule wins: URL prefixes and paths before hosts,
    longer before shorter."""
    host = _host(url)
    best: tuple[int, int] | None = None
    found: tuple[str, str] | None = None
    for key, tier in source_tiers:
        if "://" in key:
            hit, rank = _under_prefix(url, key), (1, len(key))
        elif is_path_key(key):
            hit, rank = _covers_path(url, key), (1, len(key))
        else:
            name = key.lower().rstrip(".")
            hit, rank = bool(host) and (host == name or host.endswith("." + name)), (0, len(name))
        if hit and (best is None or rank > best):
            best, found = rank, (key, tier)
    return found


def source_tier_rule(url: str, source_tiers: Sequence[tuple[str, str]]) -> str | None:
    """The organisation's tier for `url` (the `source_tiers` setting), or None when no rule covers
    it: the tier of the most specific rule (tier_rule)."""
    rule = tier_rule(url, source_tiers)
    return None if rule is None else normalize_tier(rule[1])


def capped_tier(url: str, model_tier: str | None, source_tiers: Sequence[tuple[str, str]] = ()) -> str:
    """The tier briefd uses for a page: the organisation's rule if one covers it, else the
    model's label, which may not reach regulator or peer_reviewed unless the host agrees
    (see MODEL_TIER_CEILING). Lower labels (news, social) are taken as given: a model that
    distrusts a page is never overruled upwards."""
    ruled = source_tier_rule(url, source_tiers)
    if ruled is not None:
        return ruled
    tier = normalize_tier(model_tier)
    host = _host(url)
    if tier == "regulator" and not _GOV_HOST.search(host):
        return MODEL_TIER_CEILING
    if tier == "peer_reviewed" and not (_ACADEMIC_HOST.search(host) or _GOV_HOST.search(host)):
        return MODEL_TIER_CEILING
    return tier



IMPACTS = ("narrows_low", "narrows_high", "narrows_both", "widens", "neutral")


TRIM = 0.1


PLAUSIBLE = 10.0


CORROBORATION = 2  # independent sources at a bound before the evidence alone sets it


# The least share of its initial distance an uncorroborated bound keeps: 1 - the highest tier
# cap (a regulator's 0.95), so even a confidence of 1.0 cannot make one source a certainty.
ONE_SOURCE_KEEPS = 1 - max(TIER_CAPS.values())


@dataclass(frozen=True)
class Reading:
    """One evidence item's reading for an estimate, already in the brief's unit.

    A point value has low == high. `confidence` should already be tier-capped
    (tier_confidence). `source` is the independence key: readings that share it share
    one source's weight."""

    low: float
    high: float
    confidence: float
    impact: str
    source: str
    round: int = 0
    tier: str | None = None  # the source's (capped) tier: an authority (ONE_SOURCE_TIERS) may settle alone
    plain: bool = True  # its quote states the figure plainly (figures.states_plainly): only so may it settle alone


@dataclass(frozen=True)
class _Weighted:
    low: float
    high: float
    weight: float
    source: str
    speaks_low: bool
    speaks_high: bool
    confidence: float = 0.0
    authority: bool = False  # an authority's tier (ONE_SOURCE_TIERS), its quote plain (Reading.plain)


def _confidence(c: float) -> float:
    return 0.0 if not isinstance(c, (int, float)) or math.isnan(c) else min(1.0, max(0.0, float(c)))


def _credible(readings: Sequence[Reading], initial: tuple[float, float] | None = None) -> list[_Weighted]:
    """Credible, plausible readings with their weights (see update_range)."""
    kept: list[Reading] = []
    for r in readings:
        if r.impact == "neutral" or _confidence(r.confidence) < CREDIBLE:
            continue
        if not all(isinstance(x, (int, float)) and math.isfinite(x) for x in (r.low, r.high)):
            continue
        kept.append(r)
    if initial is not None:
        kept = _plausible(kept, initial)
    per_source: dict[str, int] = {}
    for r in kept:
        per_source[r.source] = per_source.get(r.source, 0) + 1
    out: list[_Weighted] = []
    for r in kept:
        lo, hi = min(r.low, r.high), max(r.low, r.high)
        c = _confidence(r.confidence)
        impact = r.impact if r.impact in IMPACTS else "narrows_both"
        out.append(_Weighted(lo, hi, c * c / per_source[r.source], r.source,
                             impact != "narrows_high", impact != "narrows_low", c,
                             r.plain and (normalize_tier(r.tier) in ONE_SOURCE_TIERS if r.tier else False)))
    return out


def _plausible(readings: list[Reading], initial: tuple[float, float]) -> list[Reading]:
    """For a positive quantity, a reading more than PLAUSIBLE times outside the brief's range
    is a different quantity (a wrong scale, an injected "$1"), unless a second source agrees."""
    lo, hi = initial
    if not lo > 0:
        return readings
    too_low = {r.source for r in readings if min(r.low, r.high) < lo / PLAUSIBLE}
    too_high = {r.source for r in readings if max(r.low, r.high) > hi * PLAUSIBLE}
    out = []
    for r in readings:
        if min(r.low, r.high) < lo / PLAUSIBLE and len(too_low) < 2:
            continue
        if max(r.low, r.high) > hi * PLAUSIBLE and len(too_high) < 2:
            continue
        out.append(r)
    return out


def _lower_quantile(points: Sequence[tuple[float, float]], q: float) -> float:
    """Smallest value whose cumulative weight from below reaches q of the total."""
    ordered = sorted(points)
    need = q * math.fsum(w for _, w in ordered)
    cum = 0.0
    for value, weight in ordered:
        cum += weight
        if cum >= need * (1 - 1e-12):
            return value
    return ordered[-1][0]


def _upper_quantile(points: Sequence[tuple[float, float]], q: float) -> float:
    return -_lower_quantile([(-v, w) for v, w in points], q)


def update_range(initial: tuple[float, float], readings: Sequence[Reading]) -> tuple[float, float]:
    """The range after a round: a pure function of all the evidence so far.

    The rule, in order:
    1. Only credible readings count: not `neutral`, confidence >= CREDIBLE (0.5), finite.
       A forum post (tier cap 0.3) can never move the range, however extreme.
    2. Plausibility (positive quantities only, initial low > 0): a reading more than 10x
       below the initial low or above the initial high is dropped unless a second source
       is out there too. An injected "$1" is read as 0.000001 USD million: dropped.
    3. Weight = confidence squared, shared among readings from the same source, so one
       page cannot outvote others by saying the same thing five times.
    4. Low bound = weighted 10th percentile of the lows of readings that speak to the low
       bound (narrows_low, narrows_both, widens); high bound = weighted 90th percentile of
       the highs of those that speak to the high bound (narrows_high, narrows_both, widens).
       A minority holding under 10 % of the weight is trimmed; evidence beyond the initial
       range with more than that widens it.
    5. A bound with no evidence keeps its initial value; if the two then cross, the side
       without evidence follows the other; if both had evidence, they are swapped.
    6. One source is not corroboration (seed 1: "only narrow where evidence supports it").
       A bound that fewer than CORROBORATION (2) independent sources speak to keeps part of
       its distance to the initial bound: with one source of confidence c it moves
       from the initial bound towards the evidence by c, keeping (1 - c), at least
       ONE_SOURCE_KEEPS (0.05), of the way: bound = evidence + (1 - c) x (initial - evidence),
       only on the side where the initial bound lies beyond the evidence. So one credible
       reading draws the range towards it but never collapses it to a point: an industry
       figure of 97 (0.7) in a 10..1000 range gives 70.9..367.9; a second independent
       source at 97 corroborates it and the range becomes 97..97. Unless that one source is an
       authority that decides alone (its tier in ONE_SOURCE_TIERS: settled_by), states one figure, plainly
       (Reading.plain), and nothing credible stands against it: then its figure is the range, as a contract may
       rest on one such source.

    No credible evidence: the initial range, unchanged. The result does not depend on the
    order of `readings`; raising an in-range reading's confidence only draws the bounds
    towards it (while it stays credible and has its own source).

    Worked example (northgate, USD million, initial 100..2000): audit office 431 (0.95),
    regulator 430 (0.9), journal 430 (0.85), contractors 410 (0.7), two news items 430 and
    450 (0.6), forum 440 (0.3), economist "up to 520" (0.85, narrows_high), anonymous blog
    10000 (0.3), injected "$1" = 0.000001 (0.3). Steps 1-2 drop the forum, blog and
    injection. Low side weights: 410: .49, 430: .81 + .7225 + .36, 431: .9025, 450: .36;
    total 3.645, 10 % = 0.3645, reached at 410 -> low 410. High side adds 520: .7225;
    total 4.3675, 10 % = 0.43675, reached from the top at 520 -> high 520. Range 410..520.
    """
    init_lo, init_hi = min(initial), max(initial)
    weighted = _credible(readings, (init_lo, init_hi))
    lows = [(w.low, w.weight) for w in weighted if w.speaks_low]
    highs = [(w.high, w.weight) for w in weighted if w.speaks_high]
    lo = _lower_quantile(lows, TRIM) if lows else init_lo
    hi = _upper_quantile(highs, TRIM) if highs else init_hi
    if lo > hi:
        if not highs:
            hi = lo
        elif not lows:
            lo = hi
        else:
            lo, hi = hi, lo
    keep_lo = _uncorroborated_share([w for w in weighted if w.speaks_low])
    keep_hi = _uncorroborated_share([w for w in weighted if w.speaks_high])
    if init_lo < lo:
        lo = min(lo, max(init_lo, (1 - keep_lo) * lo + keep_lo * init_lo))  # a convex mix: no overflow
    if hi < init_hi:
        hi = max(hi, min(init_hi, (1 - keep_hi) * hi + keep_hi * init_hi))
    return (lo, hi)


def _uncorroborated_share(side: Sequence[_Weighted]) -> float:
    """How much of its distance to the initial bound a bound keeps (update_range, step 6):
    0 when CORROBORATION independent sources speak to it, 1 - c for one source (its most
    confident reading, at least ONE_SOURCE_KEEPS), 1 with no evidence."""
    sources = {w.source for w in side}
    if len(sources) >= CORROBORATION:
        return 0.0
    if not sources:
        return 1.0
    if all(w.authority for w in side) and _one_figure(side):
        return 0.0  # one authority (a regulator-tiered manual, a government host) settles alone: settled_by
    return max(ONE_SOURCE_KEEPS, 1 - max(w.confidence for w in side))


def settled_by(readings: Sequence[Reading], initial: tuple[float, float] | None = None) -> str | None:
    """The one authoritative source an estimate rests on, or None: every credible reading is that source's, and
    its tier is one that decides alone (ONE_SOURCE_TIERS: the organisation's source_tiers rule names the document
    the authority, or the host is a government's). As a contract may rest on one such source, so may a range:
    its figure, stated plainly with nothing credible against it, is the range (update_range), and the report
    says the range rests on it. Nothing credible against it means no other source's credible reading at all."""
    credible = _credible(readings, initial)
    sources = {w.source for w in credible}
    if len(sources) == 1 and all(w.authority for w in credible) and _one_figure(credible):
        return sources.pop()
    return None


def _one_figure(side: Sequence[_Weighted]) -> bool:
    """Whether readings state one figure (every low and every high the same, within SAME_FIGURE): what
    "stated plainly" asks of a source that settles alone (settled_by). A source whose quotes give 1, 5 and 60
    seconds for the one quantity asked states several figures, of several things: at most one is the answer,
    and nothing says which, so it moves the range as any one source does."""
    ends = [w.low for w in side] + [w.high for w in side]
    lo, hi = min(ends), max(ends)
    return math.isclose(lo, hi, rel_tol=SAME_FIGURE) if side else False


def credible_sources(readings: Sequence[Reading]) -> int:
    """How many independent sources give a credible (non-neutral, confidence >= 0.5) reading."""
    return len({w.source for w in _credible(readings)})


def weakest_bound(current: tuple[float, float], readings: Sequence[Reading]) -> str:
    """Seed 4's reflect step for an estimate: which bound has the least evidence at it.

    A reading supports the low bound when its low lies in the bottom quarter of the current
    range, the high bound when its high lies in the top quarter (credible readings, weighted
    as in update_range). A bound with under half the other's support is the one to research
    next: "narrow_low" or "narrow_high"; otherwise (or with no evidence) "both".
    """
    lo, hi = min(current), max(current)
    half = _half_width(lo, hi)
    if not half > 0:
        return "both"
    eps = 2 * (half * 1e-9)  # = width * 1e-9, without computing a width that may overflow
    quarter = half / 2
    low_support = math.fsum(w.weight for w in _credible(readings)
                            if w.speaks_low and lo - eps <= w.low <= lo + quarter)
    high_support = math.fsum(w.weight for w in _credible(readings)
                             if w.speaks_high and hi - quarter <= w.high <= hi + eps)
    if low_support < high_support / 2:
        return "narrow_low"
    if high_support < low_support / 2:
        return "narrow_high"
    return "both"




def _clamp01(x: float) -> float:
    return 0.0 if math.isnan(x) else min(1.0, max(0.0, x))


def _half_width(lo: float, hi: float) -> float:
    """(hi - lo) / 2, finite for any finite lo <= hi.

    Why halves: hi - lo overflows to inf for a range such as -1e308..1e308, and the
    centre (lo + hi) / 2 likewise; hi/2 - lo/2 and lo/2 + hi/2 cannot. Halving is exact
    for normal floats, so every ordinary range gets the same result as the plain formula;
    only subnormal ends (below 2.2e-308) lose their last bit, and a half-width that
    rounds to 0 there is treated as an empty range rather than divided by.
    """
    return hi / 2 - lo / 2


def _centre(lo: float, hi: float) -> float:
    return lo / 2 + hi / 2


def _bounded(x: float) -> float:
    """x within the finite floats (nan as 0): a ratio over a tiny width may overflow to inf."""
    if math.isnan(x):
        return 0.0
    return min(_FLOAT_MAX, max(-_FLOAT_MAX, x))


_FLOAT_MAX = sys.float_info.max


def width_reduction_pct(initial: tuple[float, float], current: tuple[float, float]) -> float:
    """How much narrower than the initial range the current one is, in percent (negative: wider).

    Total: any finite ranges give a finite number <= 100 (an empty or non-finite initial range
    gives 0.0), because it goes into events and report.json, where inf is not JSON.
    """
    if not all(math.isfinite(x) for x in (*initial, *current)):
        return 0.0
    ih = _half_width(min(initial), max(initial))
    ch = _half_width(min(current), max(current))
    if not ih > 0:
        return 0.0
    return _bounded(tidy(_bounded(100.0 * ((ih - ch) / ih))))


def progress_score(
    initial: tuple[float, float],
    current: tuple[float, float],
    target_low: float | None = None,
    target_high: float | None = None,
    target_width: float | None = None,
) -> float:
    """Seed 1's progress score, 0..1.

    width progress = (initial width - current width) / (initial width - target width), in 0..1
    centre alignment = 1 - |current centre - target centre| / (initial width / 2), in 0..1
    score = harmonic mean of the two (0 when either is 0). With target_low and target_high the
    target width is their difference; with only target_width the score is the width term
    alone; with no target at all the target width is 0. The score falls when the range widens.

    Total: any finite inputs give a number in 0..1 (a non-finite one gives 0.0). The brief's
    validation keeps ranges sane, but evidence can move a range anywhere a page's numbers
    reach, and a score that raised would fail the brief.
    """
    given = [*initial, *current] + [t for t in (target_low, target_high, target_width) if t is not None]
    if not all(isinstance(v, (int, float)) and math.isfinite(v) for v in given):
        return 0.0
    i_lo, i_hi = min(initial), max(initial)
    c_lo, c_hi = min(current), max(current)
    # Half-widths, not widths: total for every finite input (see _half_width).
    ih, ch = _half_width(i_lo, i_hi), _half_width(c_lo, c_hi)
    centre: float | None = None
    if target_low is not None and target_high is not None:
        t_lo, t_hi = min(target_low, target_high), max(target_low, target_high)
        th, centre = _half_width(t_lo, t_hi), _centre(t_lo, t_hi)
    else:
        th = target_width / 2 if target_width is not None else 0.0
    if ih - th > 0:
        width = _clamp01((ih - ch) / (ih - th))
    else:  # the initial range was already as narrow as the target
        width = 1.0 if ch <= th else 0.0
    if centre is None:
        return width
    offset = abs(_centre(c_lo, c_hi) - centre)  # may be inf for centres 2e308 apart: align is then 0
    align = _clamp01(1 - offset / ih) if ih > 0 else (1.0 if offset == 0 else 0.0)
    if width == 0 or align == 0:
        return 0.0
    return 2 * width * align / (width + align)


PLATEAU_GAIN = 0.005   # seed 1: a score that moved less than this ...


PLATEAU_ROUNDS = 2     # ... over this many rounds has converged


def plateau(scores: Sequence[float], min_gain: float = PLATEAU_GAIN, window: int = PLATEAU_ROUNDS) -> bool:
    """True when the score has moved less than `min_gain` over the last `window` rounds.

    Needs window + 1 scores. "Moved" counts both ways: a score that fell means new evidence
    widened the range, which is news, not convergence, so it does not count as a plateau.
    """
    if window < 1 or len(scores) < window + 1:
        return False
    recent = list(scores[-(window + 1):])
    if not all(math.isfinite(s) for s in recent):
        return False
    return max(recent) - min(recent) < min_gain


TARGET_SOURCES = CORROBORATION  # a range counts as the answer only with this many independent credible sources inside it


def target_met(
    current: tuple[float, float],
    target_low: float | None = None,
    target_high: float | None = None,
    target_width: float | None = None,
) -> bool:
    """Whether the range itself meets the brief's target (seed 1, read literally).

    With target_low/target_high: the whole range lies inside [target_low, target_high].
    With target_width: the range is no wider than it. With no target: never (the brief
    narrows toward a point, and a point is not claimed from evidence; the loop stops on
    convergence, stalling, the budget or the round cap instead).

    Why not the progress score: it blends width and centre, so 430..520 against a 400..460
    target scores 0.968 while 520 lies outside the target; a score says how far the range
    has come, not whether it is the answer.
    """
    lo, hi = min(current), max(current)
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return False
    if target_low is not None and target_high is not None:
        return min(target_low, target_high) <= lo and hi <= max(target_low, target_high)
    if target_width is not None:
        return _half_width(lo, hi) <= target_width / 2
    return False


def supporting_sources(current: tuple[float, float], readings: Sequence[Reading],
                       initial: tuple[float, float] | None = None) -> int:
    """How many independent sources give a credible reading that lies inside `current`.

    Credible is what update_range counts: a non-neutral reading whose tier-capped
    confidence is at least CREDIBLE (0.5), so a regulator, peer-reviewed, industry or news
    source can be credible and a social/anonymous one (capped at 0.3) never is; with
    `initial`, a lone reading more than PLAUSIBLE times outside it is left out too.
    Independent means a different `source` (the page's URL). A reading supports the range
    when both its ends lie inside it: a figure the range does not contain is not support.
    """
    lo, hi = min(current), max(current)
    return len({w.source for w in _credible(readings, initial) if lo <= w.low and w.high <= hi})



SUPPORT_NEEDED = 1.2


DOMINANCE = 2.0


_RANK = {tier: i for i, tier in enumerate(TIERS)}  # 0 = regulator, the highest tier


_HIGH_STANDING = _RANK["peer_reviewed"]


@dataclass(frozen=True)
class Stance:
    """The model's label for one evidence item. `domain` is the independence key (independent_source);
    `url` the page or document itself, named where one source decides."""

    stance: str  # supports | contradicts | neutral
    confidence: float
    tier: str | None
    domain: str
    url: str | None = None


@dataclass(frozen=True)
class Verdict:
    value: str  # supported | refuted | inconclusive
    rule: str
    evidence_level: str  # deterministic | advisory
    support: float
    contradiction: float


@dataclass(frozen=True)
class _Side:
    weight: float
    domains: int
    best_rank: int  # the best tier on this side (lowest rank); len(TIERS) when empty
    best_tier: str


def _side(best: dict[str, tuple[float, int]]) -> _Side:
    ranks = [rank for _, rank in best.values()]
    best_rank = min(ranks, default=len(TIERS))
    return _Side(math.fsum(c for c, _ in best.values()), len(best), best_rank,
                 TIERS[best_rank] if best_rank < len(TIERS) else "none")


def _blocking(rank_against: Iterable[int], side: _Side) -> int | None:
    """The best rank among opposing items that block this side, or None."""
    limit = max(side.best_rank, _HIGH_STANDING)
    blockers = [r for r in rank_against if r <= limit]
    return min(blockers) if blockers else None


def verdict(stances: Sequence[Stance]) -> Verdict:
    """The hypothesis verdict from the model's stance labels: always `advisory`.

    Seed 2: a verdict is deterministic only when computed from a measured figure against a
    target (contract_verdict); a verdict that rests on the model's reading of each quote
    ("supports", "contradicts") is the model grading its own homework, however carefully
    the labels are weighed. The weighing (_weigh) is shared with contract_verdict.
    """
    return _weigh(stances, ADVISORY)


def _weigh(stances: Sequence[Stance], level: str) -> Verdict:
    """Weigh stances into a verdict; `level` says where the stances came from.

    1. Each item's confidence is capped by its tier; items under CREDIBLE (0.5) after that
       (every social-tier item) are counted but decide nothing; neutral items are ignored.
    2. Independence: per domain and side, only the strongest item counts.
    3. support = sum over supporting domains; contradiction likewise.
    4. supported when support >= 1.2, support >= 2 x contradiction, and no credible
       contradiction comes from a tier at or above the best support's tier, or from a
       peer-reviewed or regulator source (a study or an official finding against the claim
       leaves it contested, however much else agrees). refuted symmetrically. Otherwise
       inconclusive. 1.2 is more than any single item can carry (0.95), so a verdict weighed
       here always rests on at least two domains (contract_verdict's one-source rule is apart).
    Adding a supporting item never undoes "supported"; the order of `stances` never matters.
    """
    best: dict[str, dict[str, tuple[float, int]]] = {"supports": {}, "contradicts": {}}
    ranks: dict[str, list[int]] = {"supports": [], "contradicts": []}
    weak = 0
    for item in stances:
        if item.stance not in best:
            continue
        tier = normalize_tier(item.tier)
        conf = tier_confidence(tier, item.confidence)
        if conf < CREDIBLE:
            weak += 1
            continue
        domain = (item.domain or "").strip().lower()
        rank = _RANK[tier]
        ranks[item.stance].append(rank)
        held = best[item.stance].get(domain)
        if held is None or (conf, -rank) > (held[0], -held[1]):
            best[item.stance][domain] = (conf, rank)
    sup, con = _side(best["supports"]), _side(best["contradicts"])
    domains = len(set(best["supports"]) | set(best["contradicts"]))
    counts = (f"{sup.domains} domain(s) support (weight {sup.weight:.2f}, best tier {sup.best_tier}), "
              f"{con.domains} contradict (weight {con.weight:.2f}, best tier {con.best_tier})")
    if weak:
        counts += f"; {weak} item(s) under confidence {CREDIBLE} ignored"
    sup_block = _blocking(ranks["contradicts"], sup)
    con_block = _blocking(ranks["supports"], con)

    def decides(side: _Side, other: _Side) -> bool:
        return side.weight >= SUPPORT_NEEDED and side.weight >= DOMINANCE * other.weight

    if decides(sup, con) and sup_block is None:
        value, why = "supported", (f"support >= {SUPPORT_NEEDED}, "
                                   f"at least {number_text(DOMINANCE)}x the contradiction, "
                                   "and no contradiction of equal or higher tier or from a regulator or "
                                   "peer-reviewed source")
    elif decides(con, sup) and con_block is None:
        value, why = "refuted", (f"contradiction >= {SUPPORT_NEEDED}, at least {number_text(DOMINANCE)}x the support, "
                                 "and no support of equal or higher tier or from a regulator or "
                                 "peer-reviewed source")
    else:
        value = "inconclusive"
        # Here a side that decides is blocked (its block is set), or it would have won above.
        if decides(sup, con) and sup_block is not None:
            why = f"support would decide, but a {TIERS[sup_block]} source contradicts"
        elif decides(con, sup) and con_block is not None:
            why = f"contradiction would decide, but a {TIERS[con_block]} source supports"
        elif not domains:
            why = "no credible evidence either way"
        else:
            why = f"neither side reaches {SUPPORT_NEEDED} with at least {number_text(DOMINANCE)}x the other's weight"
    return Verdict(value=value, rule=f"{value}: {counts}; {why}", evidence_level=level,
                   support=round(sup.weight, 6), contradiction=round(con.weight, 6))


DETERMINISTIC, ADVISORY = "deterministic", "advisory"


# What each evidence level means, in the words the report prints under the verdict.
EVIDENCE_LEVEL_MEANING: dict[str, str] = {
    DETERMINISTIC: ("Deterministic: code read the figures in the quotes and compared them with the brief's "
                    "target; the model's opinion of the quotes was not used."),
    ADVISORY: ("Advisory: this verdict weighs the model's own reading of each quote (supports or "
               "contradicts); no figure was checked against a target. Treat it as a lead to verify, not "
               "a finding. Give the hypothesis a metric, comparator, target and unit for a computed verdict."),
}


EVIDENCE_LEVEL_WORDS: dict[str, str] = {
    # the same two meanings in a few words, for the report's answer line
    DETERMINISTIC: "computed from the quoted figures against the brief's target, not judged by the model",
    ADVISORY: ("weighed from the model's reading of each source (supports or contradicts): "
               "a lead to verify, not a finding"),
}


@dataclass(frozen=True)
class Quoted:
    """One kept evidence item for contract_verdict: its verbatim quote, its (capped) tier, its source."""

    quote: str
    tier: str | None
    domain: str            # the independence key (independent_source)
    url: str | None = None  # the page or document itself, named where one source decides
    lead: str = ""         # the passage before the quote: where its figure's unit or setting may be named
    unit_kind: str = ""    # what its document marks the quote's part as (layout.py): "" for prose


# One source suffices for a contract when code read its figure (never the model's label) in a
# source of these tiers: the organisation's source_tiers rule says the document is the authority
# (a product's own manual, a regulator's own filing), or the host is a government's (capped_tier).
# A second source is asked for everywhere else because any one page may be wrong; the authority
# on a fact is not corroborated by a blog repeating it. It decides only where no credible quote
# reads the other way: where sources disagree, the weighing (_weigh) decides, as before.
ONE_SOURCE_TIERS: tuple[str, ...] = ("regulator",)


def _one_source(stances: Sequence[Stance], torn: bool = False) -> tuple[str, str] | None:
    """(stance, domain) when an authoritative source decides alone; None otherwise.

    The stance is the one every credible stance takes (supports or contradicts), and a source
    of ONE_SOURCE_TIERS takes it; any credible stance on the other side, from any source,
    including another quote of the same document, means the sources disagree. `torn`: a
    credible quote states figures on both sides of the target (neutral, as code cannot tell
    which one is the metric): that is disagreement too, so one source cannot settle it."""
    if torn:
        return None
    sides: set[str] = set()
    deciding: list[str] = []
    for item in stances:
        if item.stance not in ("supports", "contradicts"):
            continue
        tier = normalize_tier(item.tier)
        if tier_confidence(tier, item.confidence) < CREDIBLE:
            continue
        sides.add(item.stance)
        if tier in ONE_SOURCE_TIERS:
            deciding.append(item.url or item.domain)
    if len(sides) != 1 or not deciding:
        return None
    return sides.pop(), min(deciding)


def contract_verdict(contract: Contract, quotes: Sequence[Quoted]) -> Verdict:
    """The verdict of a hypothesis with a contract: `deterministic`.

    Each quote's stance is quote_stance's, computed from the figures code reads in it; the
    model's stance label is never used, so a quote stating "a 90th-percentile lead level of
    7.6 ppb" counts against "< 5 ppb" whatever the model called it. Each quote weighs what
    its source's tier allows (TIER_CAPS: the tier is the organisation's source_tiers rule or
    the model's label capped by capped_tier), not the model's confidence, and the quotes are
    weighed by the same rule as `verdict` (independent domains, 1.2, 2x, no equal-or-higher
    tier against). Where that leaves it inconclusive, one source decides when it is of
    ONE_SOURCE_TIERS and no credible quote disagrees (_one_source): the rule says "one source".
    """
    stances: list[Stance] = []
    counted = {"supports": 0, "contradicts": 0, "neutral": 0}
    torn = False
    for item in quotes:
        reading = quote_stance(contract, item.quote, item.url, item.lead, item.unit_kind)
        counted[reading.stance] += 1
        tier = normalize_tier(item.tier)
        stances.append(Stance(stance=reading.stance, confidence=TIER_CAPS[tier], tier=tier, domain=item.domain,
                              url=item.url))
        outcomes = {f.outcome for f in reading.figures}
        torn = torn or (MEETS in outcomes and FAILS in outcomes and TIER_CAPS[tier] >= CREDIBLE)
    weighed = _weigh(stances, DETERMINISTIC)
    head = (f"contract {contract.describe()}: {counted['supports']} quote(s) with a figure that meets it, "
            f"{counted['contradicts']} with one that fails it, {counted['neutral']} with none that decides")
    alone = _one_source(stances, torn) if weighed.value == "inconclusive" else None
    if alone is None:
        return replace(weighed, rule=f"{head}; {weighed.rule}")
    stance, domain = alone
    value = "supported" if stance == "supports" else "refuted"
    tiers = " or ".join(ONE_SOURCE_TIERS)
    why = (f"{value}: one source suffices: code read a figure that {'meets' if value == 'supported' else 'fails'} "
           f"the contract in a {tiers} source ({domain}), and no credible source disagrees")
    return replace(weighed, value=value, rule=f"{head}; {why}")
