"""Datasette plugin for the lab's search index: free text -> FTS5 OR query.

Datasette's own ``_search`` ANDs every term, so a natural-language question
("Why was the Kestrel River bridge closed?") matches nothing. Web search
engines rank documents that match *some* of the words; this SQL function lets
the canned query in metadata.json do the same: it keeps the word tokens of the
user's text, drops stopwords, quotes each token (so no FTS5 syntax from the
user can get through) and joins them with OR. bm25() then ranks the matches.
"""

from __future__ import annotations

import re

from datasette import hookimpl

# Words that match nearly every page and would only add noise to bm25.
STOPWORDS = frozenset(
    """a an and are as at be been but by did do does for from had has have how
    in into is it its much many of on or over that the their there these this
    to was were what when where which who why will with than about under
    after before between during""".split()
)

# A token that appears in no page: MATCH needs a valid query even when the
# user's text had no usable word, and an empty result is the honest answer.
NO_MATCH = '"zzlabnomatchzz"'

MAX_TERMS = 32

_WORD = re.compile(r"\w+", re.UNICODE)


def fts_or_query(text: str | None) -> str:
    """Turn free text into a safe FTS5 query: quoted terms joined by OR."""
    terms: list[str] = []
    for word in _WORD.findall((text or "").lower()):
        if word in STOPWORDS or word in terms:
            continue
        terms.append(word)
        if len(terms) >= MAX_TERMS:
            break
    if not terms:
        return NO_MATCH
    return " OR ".join(f'"{term}"' for term in terms)


@hookimpl
def prepare_connection(conn):
    conn.create_function("lab_fts_or_query", 1, fts_or_query, deterministic=True)
