"""The web console in a real browser (Debian's chromium, headless, through chromium-driver), against a
running embedded deployment of the traffic app, as a person would use it: sign in, add a camera
through the form, see its thumbnail appear with the tracker's boxes drawn on it, see its vehicles
counted on the app's page, pause it and see it stop. Screenshots go to the test's output folder
(and, with VNX_SCREENSHOTS_DIR, there too: docs/images holds the README's)."""

import os
import re
import shutil
import threading
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest

from vidnexus.roles.console import Tokens
from vidnexus.roles.console_pages import COOKIE

READ, ADMIN = "read-token-0123456789", "admin-token-0123456789"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"


def wait(what, check, timeout_s=90.0, every_s=0.5):
    """Until ``check()`` is true; a page still loading (the element not there yet, or replaced while
    read) counts as not yet."""
    from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException

    deadline = time.monotonic() + timeout_s
    while True:
        try:
            got = check()
        except (NoSuchElementException, StaleElementReferenceException):
            got = None
        if got:
            return got
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(every_s)


@pytest.fixture
def deployment(tmp_path):
    """`vidnexus run traffic --console-port 0` with no stream yet: the run follows the registry."""
    from vidnexus.apps import load_app
    from vidnexus.config import Settings
    from vidnexus.roles.embedded import Embedded

    data = Path(os.environ.get("VNX_DATA_DIR", ".vnx/data")).resolve()
    emb_data = tmp_path / "data"
    emb_data.mkdir()
    (data / "models").mkdir(parents=True, exist_ok=True)
    (emb_data / "models").symlink_to(data / "models", target_is_directory=True)
    settings = Settings(bus="memory", store="chdb", data_dir=emb_data, topic_prefix="browser")
    run = Embedded(settings, load_app("traffic"), console=("127.0.0.1", 0, Tokens(READ, ADMIN)))
    done: dict = {}
    t = threading.Thread(target=lambda: done.setdefault("result", run.run(timeout_s=600)), daemon=True)
    t.start()
    try:
        wait("the console to start (after the models load)", lambda: run.console.server.started or not t.is_alive(), 300)
        assert t.is_alive(), "the run ended before its console started"
        yield run
    finally:
        run.stop()
        t.join(120)
        run.close()
    assert not t.is_alive()


@pytest.fixture
def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    assert Path(CHROMEDRIVER).exists(), "chromium-driver is not installed (scripts/test.sh installs it with apt-get)"
    opts = webdriver.ChromeOptions()
    opts.binary_location = shutil.which("chromium") or "/usr/bin/chromium"
    for a in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--window-size=1280,1000",
              "--no-first-run", "--disable-extensions"):
        opts.add_argument(a)
    d = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
    d.set_page_load_timeout(60)
    yield d
    d.quit()


def thumbnail_has_boxes(url: str, token: str, name: str) -> bool:
    import cv2

    req = urllib.request.Request(f"{url}/streams/{name}/thumbnail.jpg", headers={"Cookie": f"{COOKIE}={token}"})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            img = cv2.imdecode(np.frombuffer(r.read(), np.uint8), cv2.IMREAD_COLOR)
    except urllib.error.HTTPError:
        return False
    if img is None:
        return False
    b, g, r_ = (img[..., i].astype(int) for i in range(3))
    boxy = ((g > 200) & (r_ < 120) & (b < 120)) | ((b < 80) & (g > 180) & (r_ > 200))  # the boxes' green or amber
    return int(boxy.sum()) > 40


def shot(driver, tmp_path, name):
    path = tmp_path / f"{name}.png"
    assert driver.save_screenshot(str(path)), name
    out = os.environ.get("VNX_SCREENSHOTS_DIR")
    if out:
        Path(out).mkdir(parents=True, exist_ok=True)
        shutil.copy(path, Path(out) / path.name)
    return path


def test_a_person_adds_a_camera_sees_it_counted_and_pauses_it(deployment, browser, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    url = deployment.console.url
    d = browser
    d.get(url + "/streams")
    assert d.current_url.endswith("/login")  # signed out: the sign-in page first
    d.find_element(By.NAME, "token").send_keys(ADMIN)
    d.find_element(By.TAG_NAME, "form").submit()
    wait("the streams page", lambda: d.current_url.endswith("/streams"), 20)
    assert "No streams registered" in d.page_source

    # Add a camera through the form: a bad rate first (the field is named, the form keeps its values).
    form = d.find_element(By.ID, "add")
    form.find_element(By.NAME, "name").send_keys("cam-ui")
    form.find_element(By.NAME, "url").send_keys("synthetic://traffic?seed=3&fps=10&seconds=120&rush=1")
    Select(form.find_element(By.NAME, "app")).select_by_visible_text("traffic")
    form.find_element(By.NAME, "fps").send_keys("5")
    form.find_element(By.NAME, "rate").send_keys("sideways")
    form.submit()
    wait("the refusal", lambda: "rate" in d.find_element(By.CLASS_NAME, "err").text, 20)
    form = d.find_element(By.ID, "add")
    assert form.find_element(By.NAME, "name").get_attribute("value") == "cam-ui"
    form.find_element(By.NAME, "rate").clear()
    form.submit()
    wait("the stream added", lambda: "stream cam-ui added" in d.page_source, 30)

    # Its thumbnail appears in the page, with the tracker's boxes drawn on the frame.
    wait("a thumbnail in the page", lambda: d.execute_script(
        "const i = document.querySelector('[data-stream=\"cam-ui\"] img'); return i && i.naturalWidth > 0;"), 90)
    wait("boxes on the thumbnail", lambda: thumbnail_has_boxes(url, ADMIN, "cam-ui"), 90)
    time.sleep(2.5)  # the page's own refresh has the boxes too
    d.refresh()
    wait("the thumbnail after a reload", lambda: d.execute_script(
        "const i = document.querySelector('[data-stream=\"cam-ui\"] img'); return i && i.naturalWidth > 0;"), 30)
    card = d.find_element(By.CSS_SELECTOR, '[data-stream="cam-ui"]')
    assert "enabled" in card.text and re.search(r"sampled [\d.]+ fps of [\d.]+ decoded", card.text) and "last frame" in card.text, card.text
    shot(d, tmp_path, "console-streams")

    # The app's page counts its vehicles (the "vehicles per camera" query, from the store).
    def counted():
        d.get(url + "/apps/traffic")
        sec = d.find_element(By.CSS_SELECTOR, 'section[data-query="vehicles per camera"]')
        rows = [r.text for r in sec.find_elements(By.CSS_SELECTOR, "tr") if r.text.startswith("cam-ui")]
        return rows and int(rows[0].split()[1]) >= 1

    wait("vehicles counted on the app page", counted, 120, every_s=2.0)
    frames = d.find_element(By.CSS_SELECTOR, 'section[data-query="frames per minute by outcome"]')
    assert frames.find_elements(By.CSS_SELECTOR, "svg polyline"), "no chart of the app's frames"
    shot(d, tmp_path, "console-app-traffic")

    # Pause it: the page says so and the camera stops publishing frames.
    d.get(url + "/streams")
    d.find_element(By.CSS_SELECTOR, '[data-stream="cam-ui"] button[value="pause"]').click()
    wait("paused", lambda: "stream cam-ui paused" in d.page_source, 20)

    def published():
        d.get(url + "/streams")
        card = d.find_element(By.CSS_SELECTOR, '[data-stream="cam-ui"]')
        return int(re.search(r"frames published (\d+)", card.text).group(1)), card.text

    time.sleep(3)  # ingest sees the registry change within its poll (0.5 s); its status is written every second
    before, text = published()
    assert "paused" in text
    time.sleep(4)
    after, _ = published()
    assert after == before, (before, after)
    assert before > 0
