"""report.html: the same Markdown as report.md, rendered by markdown-it-py.

report.html is report.md rendered, so the two cannot disagree. markdown-it-py is a
CommonMark renderer made for this (the spec's escaping and link rules, tested against
the spec): briefd's own escaping decides what the Markdown means, and the renderer only
turns it into HTML. Raw HTML is off (`html: False`: a tag in the Markdown is text), no
linkify or typographer, and its link validator lets through only http(s) URLs,
briefd's own #source-n anchors and the charts beside the report; the CSP forbids
scripts and any load but inline styles (the charts are inline SVG: nothing to load).
"""

from __future__ import annotations

import re
from typing import Any, Mapping, Sequence

from ..core.brief import ID_RE
from ..core.untrusted import fold, html_escape
from .charts import CHART_NAMES, report_charts
from .markdown import MarkdownDoc, followed_report, markdown_doc
from .markup import SOURCE_ANCHOR
from .report import safe_http_url


def _e(value: Any) -> str:
    return html_escape(value)


_ANCHOR_RE = re.compile(rf"#{SOURCE_ANCHOR}\d{{1,9}}")
_FOLLOWED_RE = re.compile(re.escape(followed_report("ID")).replace("ID", ID_RE.pattern))  # a follow-up's parent


def valid_link(url: str) -> bool:
    """markdown-it's link validator for report.html: http(s) URLs (as safe_http_url allows),
    briefd's own #source-n anchors, the charts (the SVG files beside the report), and the earlier
    report a follow-up links to (../<id>/report.md, an id as brief.valid_id allows: no way out
    of the outbox)."""
    return (url in CHART_NAMES or _ANCHOR_RE.fullmatch(url) is not None or safe_http_url(url) is not None
            or _FOLLOWED_RE.fullmatch(url) is not None)


def _markdown_renderer() -> Any:
    from markdown_it import MarkdownIt

    md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False}).enable("table")
    # markdown-it-py documents replacing validateLink on an instance; its types declare it a
    # method, so mypy calls the documented assignment method-assign.
    md.validateLink = valid_link  # type: ignore[method-assign]
    return md


_CSS = """
body{font:16px/1.5 system-ui,sans-serif;margin:0;background:#fafafa;color:#222}
main{max-width:52rem;margin:0 auto;padding:1.5rem;background:#fff}
h1{font-size:1.6rem;line-height:1.25}
.status{color:#555}.status strong{color:#222}
.note{border-left:4px solid #d90;background:#fff8e6;padding:.5rem 1rem;margin:1rem 0}
blockquote{border-left:4px solid #ccc;margin:.5rem 0;padding:.25rem 1rem;color:#333;overflow-wrap:anywhere}
table{border-collapse:collapse;margin:.5rem 0}td,th{border:1px solid #ddd;padding:.25rem .5rem;text-align:left}
pre{background:#f3f3f3;padding:.75rem;overflow:auto;white-space:pre-wrap}
li{overflow-wrap:anywhere}.chart svg{display:block;max-width:100%;height:auto}
""".strip()
# Nothing loads: no script, image, font, frame or connection; styles are the inline sheet
# above, and the charts are inline SVG elements (drawn by briefd, text escaped, no script).
CSP = "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'"


def _html_tokens(doc: MarkdownDoc, charts: Mapping[str, str]) -> tuple[Any, list[Any]]:
    """The Markdown's tokens, with the doc's marks set as attributes, links given rel, and
    each chart image replaced by its SVG inline (`charts`: file name to SVG text); any other
    image (none is made by briefd) becomes its alt text."""
    from markdown_it.token import Token

    md = _markdown_renderer()
    tokens = md.parse(doc.text)
    for token in tokens:
        mark = doc.marks.get(token.map[0]) if token.map else None
        if mark is not None and mark[0] == token.type:
            for name, value in mark[1].items():
                token.attrSet(name, value)
        children = token.children or []
        for i, child in enumerate(children):
            if child.type == "link_open":
                internal = str(child.attrGet("href") or "").startswith("#")
                if internal:
                    child.attrSet("class", "cite")
                else:  # a source opens beside the report (and out of the web page's frame), telling it nothing
                    child.attrSet("rel", "noopener noreferrer nofollow")
                    child.attrSet("target", "_blank")
            elif child.type == "image":
                svg = charts.get(str(child.attrGet("src")))
                inline = Token("html_inline" if svg is not None else "text", "", 0)
                inline.content = svg if svg is not None else child.content
                children[i] = inline
    return md, tokens


def render_html(report: Mapping[str, Any], charts: Sequence[tuple[str, str]] | None = None) -> str:
    """report.html: report.md rendered by markdown-it-py in one standalone HTML5 page with
    inline CSS; each chart report.md shows beside it is inlined there as SVG: `charts` as
    report_charts drew them (write_report draws them once for the files and the page), or
    drawn here for a caller that has none yet."""
    return html_page(report, markdown_doc(report), report_charts(report) if charts is None else charts)


def html_page(report: Mapping[str, Any], doc: MarkdownDoc, charts: Sequence[tuple[str, str]]) -> str:
    """report.html from report.md's document already built and the charts already drawn (write_report builds
    each once for the files and the page)."""
    md, tokens = _html_tokens(doc, dict(charts))
    body = md.renderer.render(tokens, md.options, {})
    question = fold(report.get("question")) or "Untitled brief"
    return "\n".join([
        "<!DOCTYPE html>",
        '<html lang="en">',
        "<head>",
        '<meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{_e(CSP)}">',
        '<meta name="referrer" content="no-referrer">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{_e(question)}</title>",
        f"<style>{_CSS}</style>",
        "</head>",
        "<body><main>",
        body.rstrip("\n"),
        "</main></body></html>",
    ]) + "\n"
