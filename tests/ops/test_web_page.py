"""The web page at `/` (issue 13 #2) in a real browser: Chromium driven by Playwright.

The daemon runs with `serve = true` on the lab (real SearXNG), with the scripted model paced at
0.4 s an answer so that a brief takes some seconds, as with a real model: the page must show it
moving while it runs, not only its end. The browser is Debian's Chromium (`make test` installs
it: no browser is downloaded from anywhere else); Playwright drives it over CDP.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import serve_ollama, wait_for
from lab.corpus import TOPICS
from lab.workspace import Workspace
from tests.ops.test_serve import Api, start, stop, up

pytestmark = [pytest.mark.lab, pytest.mark.slow]

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
NORTHGATE = TOPICS["northgate"].question


@pytest.fixture(scope="module")
def paced_api(tmp_path_factory: pytest.TempPathFactory, search_lab) -> Iterator[Api]:
    root = tmp_path_factory.mktemp("web")
    (root / "inbox").mkdir()
    for model in serve_ollama(root / "ollama", "scripted", name="ollama-paced",
                              extra=("--seconds-per-answer", "0.4")):
        ws = Workspace(root=root, searxng_url=search_lab.searxng_url, ollama_url=model.url, model="lab-scripted")
        proc, port = start(ws, "run", BRIEFD_SERVE="true")
        try:
            up(port, proc)
            api = Api(ws, port, proc)
            yield api
            api.client.close()
        finally:
            stop(proc)


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    assert CHROMIUM, "no chromium on PATH: `make test` installs Debian's (apt-get install chromium)"
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield chromium
        chromium.close()


def test_submit_a_brief_watch_it_finish_live_and_open_its_report(paced_api: Api, browser, tmp_path: Path) -> None:
    from playwright.sync_api import expect

    page = browser.new_page()
    page.goto(paced_api.base + "/")
    expect(page.locator("#health")).to_contain_text("briefd")
    page.fill("#f-question", NORTHGATE)
    page.fill("#f-id", "from-the-page")
    page.select_option("#f-depth", "quick")
    page.locator("summary", has_text="Estimate a number").click()
    page.fill("#f-unit", "USD million")
    page.fill("#f-low", "100")
    page.fill("#f-high", "2000")
    page.click("#submit button[type=submit]")
    expect(page.locator("#submit-result")).to_contain_text("Submitted as from-the-page")

    card = page.locator('.card[data-id="from-the-page"]')
    # live: the range band is drawn from an iteration_update while the brief still runs
    band = card.locator('svg.band rect[data-band="range"]')
    expect(band).to_have_count(1, timeout=120_000)
    assert card.get_attribute("data-state") is None, "the band came only with the end, not live"
    assert page.locator('.card[data-id="from-the-page"] svg.band').get_attribute("data-rounds") == "1"
    page.screenshot(path=str(tmp_path / "running.png"), full_page=True)
    expect(card).to_have_attribute("data-state", "done", timeout=180_000)
    low, high = (float(card.locator("svg.band").get_attribute(f"data-{end}") or "nan") for end in ("low", "high"))
    final = paced_api.client.get("/briefs/from-the-page").json()["report"]["estimate"]["final"]
    assert (low, high) == (final["low"], final["high"])  # the last band drawn is the report's range

    card.get_by_role("button", name="Open the report").click()
    report = page.frame_locator("#report")
    expect(report.locator("body")).to_contain_text("Northgate", timeout=30_000)
    # a citation moves within the report; the report is not the page's own document
    report.locator("a.cite").first.click()
    frame = next(f for f in page.frames if f.url.startswith("blob:"))
    wait_for(lambda: "#source-" in frame.url, 10, "the citation to move within the report")
    expect(report.locator("h1")).to_contain_text("Northgate")  # still the report, not the page's own document
    assert report.locator("script").count() == 0
    row = page.locator('#briefs tr[data-id="from-the-page"]')
    expect(row).to_contain_text("done")
    page.screenshot(path=str(tmp_path / "page.png"), full_page=True)


def test_the_schema_s_errors_are_shown_beside_their_fields(paced_api: Api, browser) -> None:
    from playwright.sync_api import expect

    page = browser.new_page()
    page.goto(paced_api.base + "/")
    page.fill("#f-question", NORTHGATE)
    page.locator("summary", has_text="Estimate a number").click()
    page.fill("#f-unit", "USD million")
    page.fill("#f-low", "900")
    page.fill("#f-high", "100")
    page.click("#submit button[type=submit]")
    error = page.locator('[data-error-for="estimate"], [data-error-for="estimate.low"], '
                         '[data-error-for="estimate.high"]').filter(has_text="low")
    expect(error).to_have_count(1)
    page.fill("#f-low", "10")
    page.fill("#f-question", "")
    page.click("#submit button[type=submit]")
    expect(page.locator('[data-error-for="question"]')).to_contain_text("question")
    expect(page.locator("#f-question")).to_have_attribute("aria-invalid", "true")
    assert not [p for p in paced_api.ws.inbox.iterdir() if not p.name.startswith(".")]


def test_history_search_finds_the_finished_brief(paced_api: Api, browser) -> None:
    from playwright.sync_api import expect

    wait_for(lambda: paced_api.client.get("/briefs/from-the-page").json().get("state") == "done", 240,
             "the page's brief")
    page = browser.new_page()
    page.goto(paced_api.base + "/")
    page.fill("#q", "Northgate")
    page.click("#search button")
    expect(page.locator("#hits li").first).to_contain_text("from-the-page")


def test_a_done_estimate_that_found_nothing_is_not_shown_as_answered(paced_api: Api, browser) -> None:
    """Issue 21's walkthrough: an estimate no source answers was listed green as "done" with its own prior
    as the answer. The lab's pages say nothing of boiling points (the Lakeside pages' figures are lead, in
    ppb), so the range stays the prior: the row says the run found no answer, in the miss's colour."""
    from playwright.sync_api import expect

    brief = {"id": "everest", "question": "What is the boiling point of water at the top of Mount Everest?",
             "depth": "quick", "estimate": {"unit": "degrees Celsius", "low": 50, "high": 100}}
    assert paced_api.client.post("/briefs", json=brief).status_code == 202
    body = paced_api.done("everest", timeout=240)
    report = body["report"]
    assert body["state"] == "done" and report["answer"]["found"] is False, report["answer"]
    page = browser.new_page()
    page.goto(paced_api.base + "/")
    row = page.locator('#briefs tr[data-id="everest"]')
    expect(row.locator("td.state")).to_contain_text("done")
    expect(row.locator("td.state")).to_contain_text("no answer found")
    expect(row.locator("td.state")).to_have_class("state miss")
    expect(row.locator("td.answer")).to_contain_text("the range is your prior, unchanged (50\u2013100 degrees Celsius)")
    miss, answered = (page.evaluate(f"getComputedStyle(document.documentElement).getPropertyValue('--{name}')")
                      for name in ("miss", "ok"))
    colour = row.locator("td.state").evaluate("e => getComputedStyle(e).color")
    assert miss.strip() != answered.strip() and colour == page.evaluate(
        "c => { const s = document.createElement('span'); s.style.color = c; document.body.append(s);"
        " const got = getComputedStyle(s).color; s.remove(); return got; }", miss.strip()), colour
