"""A real ctxpack server (uvicorn on a free port, in a thread) and a headless Chromium from
the Debian packages, driven by Selenium through /usr/bin/chromedriver (so Selenium Manager
never downloads a browser or a driver). Shared by the browser tests and `make screenshots`."""

from __future__ import annotations

import shutil
import socket
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"


def browser_missing() -> str | None:
    """Why the browser tests cannot run here, or None when they can."""
    if not Path(CHROMIUM).exists():
        return (
            f"Chromium is not installed ({CHROMIUM}): apt-get install -y chromium chromium-driver"
        )
    if not Path(CHROMEDRIVER).exists():
        return f"chromedriver is not installed ({CHROMEDRIVER}): apt-get install -y chromium-driver"
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (pip install -e '.[dev]')"
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def live_server(app: Any) -> Iterator[str]:
    """Serve ``app`` on 127.0.0.1 in a background thread; yields its base URL."""
    import uvicorn

    port = free_port()
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="live-server", daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the live server did not start")
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)


@contextmanager
def chromium(width: int = 1280, height: int = 900) -> Iterator[Any]:
    """A headless Chromium with a fresh profile, no network chatter of its own."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="ctxpack-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        "--disable-extensions",
        "--disable-default-apps",
        f"--user-data-dir={profile}",
        f"--window-size={width},{height}",
    ):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def sign_in(driver: Any, base: str, key: str) -> None:
    from selenium.webdriver.common.by import By

    driver.get(base + "/ui/login")
    driver.find_element(By.ID, "key").send_keys(key)
    driver.find_element(By.ID, "signin").click()
    wait_for(driver, lambda d: d.find_elements(By.CSS_SELECTOR, '[data-page="overview"]'))


def wait_for(driver: Any, condition: Any, timeout: float = 20) -> Any:
    from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
    from selenium.webdriver.support.ui import WebDriverWait

    # A page that is being replaced makes elements stale mid-check: check again.
    ignored = (NoSuchElementException, StaleElementReferenceException)
    return WebDriverWait(driver, timeout, ignored_exceptions=ignored).until(condition)
