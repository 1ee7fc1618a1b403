"""Issue 33's done-criterion: opening a committed notebook in a real JupyterLab and saving it unchanged
leaves ``git status`` clean (before the kernel name was fixed, a save rewrote both the ``.ipynb`` and its
jupytext ``.py``; after it, a save still added the kernel's ``language_info``, which the pre-save hook
``rftlab.reports.lab.strip_language_info`` that ``make setup`` registers now drops).

A fresh clone of the repository's committed tree in a temporary folder; ``jupyter lab`` serves its
``notebooks/`` on a free loopback port with a random token, its config, runtime, settings and workspace
folders in the temporary folder too; Debian's headless Chromium, driven by selenium, opens the notebook,
waits for its cells, and presses Ctrl+S. The test waits for both files of the pair to be written (their
modification times change: the save really happened) and then asks git. Skips, saying why, without
Chromium or a git checkout.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from headless_chromium import chromium, require_chromium

REPO = Path(__file__).resolve().parents[2]
NOTEBOOK = "02_memory"

pytestmark = pytest.mark.slow


def _require_tools() -> None:
    require_chromium()
    if not (REPO / ".git").exists() or shutil.which("git") is None:
        pytest.skip("needs the project as a git checkout (git status is the check)")
    pytest.importorskip("selenium")
    pytest.importorskip("jupyterlab")


def _clone(dest: Path) -> Path:
    subprocess.run(["git", "clone", "-q", "--no-hardlinks", str(REPO), str(dest)], check=True)
    assert not subprocess.run(
        ["git", "-C", str(dest), "status", "--porcelain"], capture_output=True, text=True, check=True
    ).stdout
    return dest


def _lab(repo: Path, home: Path, port: int, token: str) -> subprocess.Popen:
    env = {
        **os.environ,
        "HOME": str(home),
        "JUPYTER_CONFIG_DIR": str(home / "config"),
        "JUPYTER_RUNTIME_DIR": str(home / "runtime"),
        "JUPYTERLAB_SETTINGS_DIR": str(home / "settings"),
        "JUPYTERLAB_WORKSPACES_DIR": str(home / "workspaces"),
    }
    argv = [sys.executable, "-m", "jupyterlab", "--no-browser", f"--port={port}", "--ip=127.0.0.1",
            f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={repo / 'notebooks'}",
            "--ServerApp.port_retries=0", "--LabApp.news_url=", "--LabApp.check_for_updates_class="
            "jupyterlab.NeverCheckForUpdate"]  # fmt: skip
    if os.geteuid() == 0:
        argv.append("--allow-root")
    return subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _wait_listening(proc: subprocess.Popen, port: int, timeout: float = 120.0) -> None:
    import urllib.request

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"jupyter lab exited: {proc.stdout.read()[-2000:]}")
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/api", timeout=2).read()
            return
        except OSError:
            time.sleep(0.5)
    raise AssertionError("jupyter lab did not answer within the timeout")


def _save_in_browser(url: str, files: list[Path]) -> None:
    from selenium import webdriver
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    driver = chromium()
    try:
        driver.get(url)
        wait = WebDriverWait(driver, 120)
        wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, ".jp-NotebookPanel .jp-Cell")))
        # the kernel has answered (JupyterLab then has its language_info to write): the realistic save
        wait.until(
            lambda d: d.find_elements(By.CSS_SELECTOR, '.jp-Notebook-ExecutionIndicator[data-status="idle"]')
        )
        before = [f.stat().st_mtime_ns for f in files]
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:  # the notebook re-renders while it settles: find it afresh on every try
                driver.find_element(By.CSS_SELECTOR, ".jp-NotebookPanel-notebook").click()
                chord = webdriver.ActionChains(driver).send_keys(Keys.ESCAPE)  # command mode, not a cell
                chord.key_down(Keys.CONTROL).send_keys("s").key_up(Keys.CONTROL).perform()
            except StaleElementReferenceException:
                continue
            time.sleep(2)
            if all(f.stat().st_mtime_ns != b for f, b in zip(files, before, strict=True)):
                return
        raise AssertionError(f"JupyterLab never wrote both files of the pair: {[f.name for f in files]}")
    finally:
        driver.quit()


def test_saving_a_notebook_unchanged_in_jupyterlab_keeps_the_tree_clean(tmp_path):
    _require_tools()
    import json

    from rftlab.reports.lab import SERVER_CONFIG

    installed = Path(sys.prefix) / "etc" / "jupyter" / "jupyter_server_config.d" / "rftlab.json"
    assert installed.is_file() and json.loads(installed.read_text()) == SERVER_CONFIG, (
        f"{installed} is missing or stale: make setup writes it"
    )
    from rftlab.rollout.viewer import free_port

    repo = _clone(tmp_path / "repo")
    before = {f: f.read_bytes() for f in (repo / "notebooks").iterdir() if f.suffix in (".ipynb", ".py")}
    files = [repo / "notebooks" / f"{NOTEBOOK}.ipynb", repo / "notebooks" / f"{NOTEBOOK}.py"]
    port, token = free_port(), secrets.token_hex(16)
    lab = _lab(repo, tmp_path / "home", port, token)
    try:
        _wait_listening(lab, port)
        _save_in_browser(f"http://127.0.0.1:{port}/lab/tree/{NOTEBOOK}.ipynb?token={token}", files)
    finally:
        lab.terminate()
        try:
            lab.wait(timeout=30)
        except subprocess.TimeoutExpired:
            lab.kill()
            lab.wait()
    status = subprocess.run(
        ["git", "-C", str(repo), "status", "--porcelain"], capture_output=True, text=True, check=True
    ).stdout
    diff = subprocess.run(["git", "-C", str(repo), "diff", "--stat"], capture_output=True, text=True).stdout
    assert status == "", f"a save with no edit changed the tree:\n{status}\n{diff}"
    assert all(f.read_bytes() == b for f, b in before.items())
