"""A headless Chromium under Selenium, for the explorer's tests and its benchmark: Debian's
``chromium`` and ``chromium-driver`` packages (``make system-deps``), never a downloaded
browser (Selenium Manager is not asked: the driver's path is given)."""

from __future__ import annotations

import shutil
from typing import Any

__all__ = ["CHROMEDRIVER", "CHROMIUM", "headless_chromium", "wait_for"]

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"


def headless_chromium(width: int = 1440, height: int = 1000) -> Any:
    """A Selenium ``webdriver.Chrome`` driving Debian's Chromium, headless, offline-safe.
    Raises RuntimeError naming the packages when they are not installed."""
    binary = shutil.which("chromium") or CHROMIUM
    driver = shutil.which("chromedriver") or CHROMEDRIVER
    if not (shutil.which(binary) and shutil.which(driver)):
        raise RuntimeError("Chromium is not installed: run `make system-deps` "
                           "(Debian packages chromium and chromium-driver)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = binary
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                 "--disable-extensions", "--no-first-run", "--disable-background-networking",
                 f"--window-size={width},{height}"):
        options.add_argument(flag)
    return webdriver.Chrome(service=Service(executable_path=driver), options=options)


def wait_for(driver: Any, script: str, *, timeout: float = 20.0) -> Any:
    """Poll the page until the JavaScript expression ``script`` is truthy; return its value
    (selenium's TimeoutException after ``timeout`` s, with the page's last error)."""
    from selenium.common.exceptions import TimeoutException
    from selenium.webdriver.support.ui import WebDriverWait

    try:
        return WebDriverWait(driver, timeout, poll_frequency=0.05).until(
            lambda d: d.execute_script(f"return ({script});"))
    except TimeoutException:
        last = driver.execute_script("return window.synapseUI && window.synapseUI.lastError")
        raise TimeoutException(f"the page never satisfied {script!r} (its last error: {last})") from None
