"""Debian's headless Chromium driven by selenium, as the browser tests use it (the viewer, JupyterLab's
save, the MLflow UI): one place for the binaries, the flags and the skip when they are missing.

The flags keep the browser offline (no background networking, no component updates) and runnable as root
in a container (``--no-sandbox``). ``.ci/run`` installs the packages."""

from __future__ import annotations

import os

import pytest

CHROMIUM = "/usr/bin/chromium"
DRIVER = "/usr/bin/chromedriver"
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--no-first-run", "--window-size=1400,1000")  # fmt: skip


def require_chromium() -> None:
    """Skip, saying why, without Debian's chromium and chromium-driver or without selenium."""
    if not (os.path.exists(CHROMIUM) and os.path.exists(DRIVER)):
        pytest.skip(
            f"needs Debian's chromium and chromium-driver ({CHROMIUM}, {DRIVER}; apt-get install chromium "
            "chromium-driver, as .ci/run does)"
        )
    pytest.importorskip("selenium.webdriver", reason="selenium is not installed (the dev extra)")


def chromium():
    """A new headless Chromium ``webdriver.Chrome`` (the caller quits it); skips as ``require_chromium``."""
    require_chromium()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in FLAGS:
        options.add_argument(flag)
    return webdriver.Chrome(service=Service(executable_path=DRIVER), options=options)
