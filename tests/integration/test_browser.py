"""A real browser on the real pages: `tuner dashboard` (a subprocess on a free port) and
the `tuner report` page, each showing the trials and the best flags.

Headless Chromium from Debian's packages (``apt-get install -y chromium``), driven by
Playwright for Python with ``executable_path`` (Playwright's own browser downloads are not
used). Missing Chromium or Playwright: the test skips locally and fails in CI (CI=true).
Screenshots go to ``test-artifacts/`` (ignored by git), for people to look at.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tuner import optuna_adapter
from tuner.testing.studies import dashboard_process, make_study

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "test-artifacts"
CHROMIUM = os.environ.get("TUNER_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
BEST_FLAGS = "--max-num-batched-tokens 5120"  # the fixture's best configuration


def _missing() -> str | None:
    if not os.access(CHROMIUM, os.X_OK):
        return f"{CHROMIUM} is missing: apt-get install -y chromium"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "Playwright for Python is missing: pip install playwright (no browser download)"
    return None


@pytest.fixture(scope="module")
def browser():
    reason = _missing()
    if reason:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(reason, pytrace=False)
        pytest.skip(reason)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        yield b
        b.close()


def _wait_for_text(page, text: str, timeout_ms: int = 45_000) -> None:
    page.wait_for_function("t => document.body && document.body.innerText.includes(t)",
                           arg=text, timeout=timeout_ms)


def test_dashboard_and_report_show_trials_and_best_flags(storage_url, browser, run_cli,
                                                         tmp_path, request):
    opened = make_study(storage_url, "mixed", n=14, name="browser")
    tag = request.node.callspec.id
    ARTIFACTS.mkdir(exist_ok=True)
    report = tmp_path / "report" / "report.html"
    code, _, err = run_cli("report", "browser", "--storage", storage_url, "-o", report)
    assert code == 0, err

    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    try:
        with dashboard_process(storage_url, tmp_path / "dashboard.log", "browser") as base:
            study_page = f"{base}/dashboard/studies/{optuna_adapter.study_id(opened.study)}"
            page.goto(study_page)
            _wait_for_text(page, "Pareto front with the SLOs")  # our figures are there
            _wait_for_text(page, "Hypervolume over trials")
            page.screenshot(path=str(ARTIFACTS / f"dashboard-study-{tag}.png"), full_page=True)

            page.goto(study_page + "/trials")
            _wait_for_text(page, "Trial 13")
            body = page.inner_text("body")
            assert "14 Trials" in body and "Trial 0" in body
            _wait_for_text(page, "Flags that differ from vLLM's defaults")  # the trial's note
            page.screenshot(path=str(ARTIFACTS / f"dashboard-trials-{tag}.png"), full_page=True)

            page.goto(study_page + "/note")
            _wait_for_text(page, "Best flags for throughput")
            _wait_for_text(page, BEST_FLAGS)
            page.screenshot(path=str(ARTIFACTS / f"dashboard-note-{tag}.png"), full_page=True)

        page.goto(report.as_uri())
        _wait_for_text(page, "Best flags")
        body = page.inner_text("body")
        assert BEST_FLAGS in body and "Best for throughput (by output_throughput, within the " \
            "SLOs): trial 3" in body
        assert "All trials" in body and "same flags as trial" in body
        images = page.evaluate("Array.from(document.images).map(i => i.complete && "
                               "i.naturalWidth > 0)")
        assert images == [True, True, True]
        page.screenshot(path=str(ARTIFACTS / f"report-{tag}.png"), full_page=True)
    finally:
        page.close()
