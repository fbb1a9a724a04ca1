"""The dashboard in a real browser (Debian's chromium driven by selenium, headless) against real
spurctld + spurd: sign in, watch a CLI job appear and finish without reload, follow its output, cancel
as owner, drain a node as admin, no console errors. Screenshots go to $SPUR_UI_SHOTS (default: the
test's tmp dir); docs/img/ holds copies."""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from integration.harness import Cluster
from integration.test_auth import KEY, _kill_jobs, _write_key
from spur.auth.tokens import mint

CHROMIUM, DRIVER = shutil.which("chromium"), shutil.which("chromedriver")
pytestmark = pytest.mark.skipif(
    CHROMIUM is None or DRIVER is None,
    reason="needs Debian's chromium and chromium-driver (scripts/setup.sh installs them as root)",
)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    root = tmp_path_factory.mktemp("dashb")
    conf = f'[auth]\nmode = "required"\njwt_key_file = "{_write_key(root / "jwt.key")}"\n'
    c = Cluster(root, conf_extra=conf, agent_conf=True)
    c.metadata = {"authorization": f"Bearer {mint(KEY, 'root', 0, now=time.time(), ttl_secs=3600)}"}
    c.start_controller()
    c.start_agent("n1", cpus=4)
    c.wait_nodes("n1")
    c.wait_rest()
    try:
        yield c
    finally:
        c.stop()
        _kill_jobs(c)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = str(CHROMIUM)
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1280,900"):
        opts.add_argument(arg)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(str(DRIVER)), options=opts)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = Path(os.environ.get("SPUR_UI_SHOTS") or tmp_path_factory.mktemp("shots"))
    out.mkdir(parents=True, exist_ok=True)
    return out


def _wait(driver: Any, predicate: Any, timeout: float = 30) -> Any:
    from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
    from selenium.webdriver.support.ui import WebDriverWait

    # the live updates replace elements between the lookup and the read: look again
    ignored = (StaleElementReferenceException, NoSuchElementException)
    return WebDriverWait(driver, timeout, poll_frequency=0.1, ignored_exceptions=ignored).until(predicate)


def _no_console_errors(driver: Any) -> None:
    errors = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
    assert errors == []


def test_in_the_browser(cluster: Cluster, browser: Any, shots: Path) -> None:
    from selenium.webdriver.common.by import By

    base = f"http://127.0.0.1:{cluster.rest_port}"
    link = cluster.cli("spur", "web", "--no-browser", "--url", base).stdout.strip()
    browser.get(link)
    _wait(browser, lambda d: d.current_url.endswith("/ui/"))
    assert "root (admin)" in browser.find_element(By.ID, "who").text
    _wait(browser, lambda d: d.find_element(By.ID, "live-status").text.startswith("live"))
    browser.save_screenshot(str(shots / "overview.png"))

    # a job submitted with the CLI appears, runs and finishes without a reload
    browser.get(f"{base}/ui/jobs?state=all")
    marker = browser.execute_script("window.__noReload = 1; return window.__noReload;")
    assert marker == 1
    script = cluster.root / "job.sh"
    script.write_text("#!/bin/sh\necho first line\nsleep 2\necho second line\n")
    out = cluster.cli("sbatch", "--parsable", "-J", "browser-job", str(script)).stdout.strip()
    job_id = int(out.split(";")[0])
    row = f'tr[data-job="{job_id}"]'
    _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, row))
    _wait(browser, lambda d: d.find_element(By.CSS_SELECTOR, row).get_attribute("data-state") == "COMPLETED")
    assert browser.execute_script("return window.__noReload;") == 1
    browser.save_screenshot(str(shots / "jobs.png"))

    # live output of a running job, then cancel it as its owner
    script.write_text("#!/bin/sh\necho hello from the browser test\nsleep 60\n")
    job_id = int(cluster.cli("sbatch", "--parsable", str(script)).stdout.strip().split(";")[0])
    browser.get(f"{base}/ui/job/{job_id}")
    _wait(browser, lambda d: "hello from the browser test" in d.find_element(By.ID, "stdout").text)
    browser.save_screenshot(str(shots / "job.png"))
    browser.find_element(By.ID, "action-cancel").click()
    _wait(browser, lambda d: d.find_element(By.ID, "job-state").text == "CANCELLED")
    assert cluster.job(job_id).state == "CANCELLED"

    # drain a node as admin, by keyboard
    browser.get(f"{base}/ui/nodes")
    field = browser.find_element(By.ID, "reason-n1")
    assert browser.find_element(By.CSS_SELECTOR, 'label[for="reason-n1"]').text == "Reason"
    field.send_keys("maintenance\n")
    _wait(browser, lambda d: d.find_elements(By.ID, "resume-n1"))
    assert {n.name: n.state for n in cluster.nodes()}["n1"] == "drained"
    browser.save_screenshot(str(shots / "nodes.png"))
    browser.find_element(By.ID, "resume-n1").click()
    cluster.wait_nodes("n1")
    for page in ("accounting", "cluster"):
        browser.get(f"{base}/ui/{page}")
        browser.save_screenshot(str(shots / f"{page}.png"))
    _no_console_errors(browser)


# WCAG 2.1 contrast of every visible piece of text (its colour over the backgrounds behind it,
# composited onto the white canvas), and a label for every form control. Run in the page.
_A11Y_AUDIT = r"""
function rgba(text) {
  const m = text.match(/rgba?\(([^)]+)\)/);
  if (!m) return [0, 0, 0, 0];
  const p = m[1].split(",").map(Number);
  return [p[0], p[1], p[2], p.length > 3 ? p[3] : 1];
}
function over(top, under) {  // top composited over an opaque colour
  const a = top[3];
  return [0, 1, 2].map(i => top[i] * a + under[i] * (1 - a));
}
function background(el) {
  const layers = [];
  for (let e = el; e; e = e.parentElement) {
    const c = rgba(getComputedStyle(e).backgroundColor);
    if (c[3] > 0) layers.push(c);
    if (c[3] >= 1) break;
  }
  let colour = [255, 255, 255];
  for (const layer of layers.reverse()) colour = over(layer, colour);
  return colour;
}
function luminance(c) {
  const [r, g, b] = c.map(v => { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); });
  return 0.2126 * r + 0.7152 * g + 0.0722 * b;
}
const low = [];
for (const el of document.querySelectorAll("body *")) {
  const own = [...el.childNodes].some(n => n.nodeType === 3 && n.textContent.trim());
  const box = el.getBoundingClientRect();
  const style = getComputedStyle(el);
  if (!own || box.width === 0 || box.height === 0 || style.visibility === "hidden") continue;
  const bg = background(el);
  const fg = over(rgba(style.color), bg);
  const [hi, lo] = [luminance(fg), luminance(bg)].sort((a, b) => b - a);
  const ratio = (hi + 0.05) / (lo + 0.05);
  const size = parseFloat(style.fontSize), bold = parseInt(style.fontWeight, 10) >= 700;
  const needed = size >= 24 || (bold && size >= 18.66) ? 3 : 4.5;
  if (ratio < needed) low.push(`${el.tagName} "${el.textContent.trim().slice(0, 30)}" ${ratio.toFixed(2)} < ${needed}`);
}
const unlabelled = [];
for (const c of document.querySelectorAll("input:not([type=hidden]), select, textarea")) {
  const named = c.getAttribute("aria-label") || c.getAttribute("aria-labelledby") || c.closest("label")
    || (c.id && document.querySelector(`label[for="${c.id}"]`)) || (c.type === "submit" && c.value);
  if (!named) unlabelled.push(`${c.tagName} ${c.name || c.id}`);
}
return {low, unlabelled};
"""


def test_every_page_reads_well_and_labels_its_controls(cluster: Cluster, browser: Any) -> None:
    """Accessibility basics on every view: text contrast (WCAG AA: 4.5:1, 3:1 for large text) and a
    label for each form control, in the browser's own computed styles."""
    base = f"http://127.0.0.1:{cluster.rest_port}"
    browser.delete_all_cookies()
    browser.get(cluster.cli("spur", "web", "--no-browser", "--url", base).stdout.strip())
    _wait(browser, lambda d: d.current_url.endswith("/ui/"))
    script = cluster.root / "a11y.sh"
    script.write_text("#!/bin/sh\necho a11y\nsleep 30\n")
    job_id = int(cluster.cli("sbatch", "--parsable", str(script)).stdout.strip().split(";")[0])
    try:
        for page in ("", "jobs?state=all", "nodes", "accounting", "cluster", f"job/{job_id}", "login"):
            browser.get(f"{base}/ui/{page}")
            audit = browser.execute_script(_A11Y_AUDIT)
            assert audit == {"low": [], "unlabelled": []}, (page, audit)
    finally:
        cluster.cli("scancel", str(job_id))
    _no_console_errors(browser)


def test_another_user_is_refused_in_the_browser(cluster: Cluster, browser: Any) -> None:
    from selenium.webdriver.common.by import By

    base = f"http://127.0.0.1:{cluster.rest_port}"
    browser.delete_all_cookies()
    browser.get(f"{base}/ui/login")
    browser.find_element(By.ID, "token").send_keys(mint(b"not-the-cluster-key-0123456789abcdef", "root", 0,
                                                         now=time.time(), ttl_secs=60))  # fmt: skip
    browser.find_element(By.CSS_SELECTOR, "form.login button").click()
    # the answer is a new page: wait for it rather than read the one being left
    _wait(browser, lambda d: "Sign-in refused" in d.find_element(By.ID, "login-error").text)
    assert browser.get_cookies() == []
