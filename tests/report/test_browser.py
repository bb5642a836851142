"""report.html in a real browser (Debian's chromium via Playwright), offline: every image shows and
no request leaves the file.

Skipped, with the reason, where chromium or playwright is missing (as tests/viewer/test_browser.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pointrix_lite.report import write_report

from .helpers import SMALL, make_run

CHROMIUM = Path("/usr/bin/chromium")
# Software WebGL as in the viewer's test; no background traffic of the browser's own.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--enable-unsafe-swiftshader",
    "--use-angle=swiftshader",
    "--disable-background-networking",
]


def playwright():
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} not installed (apt-get install chromium)")
    api = pytest.importorskip("playwright.sync_api", reason="playwright not installed (pip install -e '.[dev]')")
    return api.sync_playwright()


def open_offline(browser, url: str) -> dict:
    """Load ``url`` with every non-file request aborted: each <img>'s state, the chart lines, what tried to leave."""
    page = browser.new_page()
    tried: list[str] = []

    def route(r):
        if r.request.url.startswith("file:"):
            r.continue_()
        else:
            tried.append(r.request.url)
            r.abort()

    page.route("**/*", route)
    page.on("request", lambda req: None if req.url.startswith(("file:", "data:")) else tried.append(req.url))
    # A fetch the page's Content-Security-Policy stops may never become a request: the console says so.
    page.on("console", lambda msg: tried.append(msg.text) if "Content Security Policy" in msg.text else None)
    page.goto(url, wait_until="load")
    found = {
        "images": page.evaluate(
            "Array.from(document.images).map(i => ({kind: i.dataset.kind, complete: i.complete,"
            " width: i.naturalWidth, height: i.naturalHeight}))"
        ),
        "polylines": page.evaluate("document.querySelectorAll('svg.chart polyline').length"),
        "tried": sorted(set(tried)),
    }
    page.close()
    return found


def test_the_page_loads_offline_and_shows_every_image(tmp_path):
    exp, written = make_run(tmp_path, views={"r_000": SMALL, "r_001": (64, 48)})
    path = write_report(exp)
    # The same page with one image from the network: the checks below must catch it.
    leaky = path.with_name("leaky.html")
    html = path.read_text(encoding="utf-8")
    leaky.write_text(html.replace("<body>", '<body><img src="http://example.com/x.png">', 1), encoding="utf-8")
    with playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page, leaked = open_offline(browser, path.as_uri()), open_offline(browser, leaky.as_uri())
        finally:
            browser.close()
    images = page["images"]
    assert len(images) == 3 * len(written)
    assert all(i["complete"] and i["width"] > 0 and i["height"] > 0 for i in images), images
    assert sorted((i["width"], i["height"]) for i in images if i["kind"] == "render") == [(40, 30), (64, 48)]
    assert page["polylines"] == 6  # val/psnr and test/psnr twice, train/loss twice
    assert page["tried"] == []
    assert any("example.com" in line for line in leaked["tried"]), leaked
