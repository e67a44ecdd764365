"""Fixtures of the dashboard tests: skipped as a whole when the extra is not installed. The
browser tests share a headless Chromium per module (``browser``) and a scratch database per
module (``database``), dropped after it."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

pytest.importorskip("starlette", reason="the dashboard extra (dogs-py[dashboard]) is not installed")

if TYPE_CHECKING:
    from pymongo import MongoClient
    from selenium.webdriver.remote.webdriver import WebDriver


def _binaries() -> tuple[str, str]:
    """Chromium and its driver; skipped without them locally, a failure in CI."""
    browser = os.environ.get("DOGS_TEST_CHROMIUM", "/usr/bin/chromium")
    driver = os.environ.get("DOGS_TEST_CHROMEDRIVER", "/usr/bin/chromedriver")
    missing = [path for path in (browser, driver) if not Path(path).is_file()]
    if missing:
        reason = (
            f"no headless Chromium: {', '.join(missing)} missing "
            "(apt-get install chromium chromium-driver)"
        )
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    return browser, driver


@pytest.fixture(scope="module")
def browser() -> Iterator[WebDriver]:
    from selenium import webdriver  # only the browser tests need Selenium

    binary, driver = _binaries()
    options = webdriver.ChromeOptions()
    options.binary_location = binary
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"):
        options.add_argument(flag)
    options.add_argument("--window-size=1400,1000")
    chrome = webdriver.Chrome(options=options, service=webdriver.ChromeService(driver))
    try:
        yield chrome
    finally:
        chrome.quit()


@pytest.fixture(scope="module")
def database(
    request: pytest.FixtureRequest, sync_mongo_client: MongoClient[dict[str, Any]]
) -> Iterator[str]:
    """A database of the module's own (``dogs_<module>_<hex>``), dropped after it."""
    module = request.module.__name__.rsplit(".", 1)[-1].removeprefix("test_")
    name = f"dogs_{module}_{uuid.uuid4().hex[:12]}"[:60]
    try:
        yield name
    finally:
        sync_mongo_client.drop_database(name)
