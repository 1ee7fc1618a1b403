"""Live curves in ``mlflow ui``: a run appends metric rows in a background thread (live tracking into a
temporary SQLite store), a real ``mlflow server`` on a free loopback port serves that store, and Debian's
headless Chromium (selenium) opens the run's metric chart. The chart must grow on its own (the page's
auto-refresh) while rows keep coming, the points it draws never outnumber what MLflow's REST API (the one
the page reads, fetched from inside the page) and the run store hold, and the screenshot is not blank.
The server's process group is killed on teardown; everything is written under the test's folder."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import threading
import time
import urllib.request
from pathlib import Path

import pytest

pytest.importorskip("mlflow")
pytest.importorskip("selenium")

from headless_chromium import chromium  # noqa: E402

from rftlab.runs import RunStore, tracking  # noqa: E402

# the x values of the first trace plotly drew in the chart (plotly keeps them on the graph's element)
DRAWN = (
    "const g = document.querySelector('.js-plotly-plot');"
    "return g && g.data && g.data.length ? Array.from(g.data[0].x) : [];"
)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


SERVER_VENV = Path(__file__).resolve().parents[2] / ".venv-mlflow"


def _mlflow_server() -> str:
    """The ``mlflow`` executable of the server's own venv (``make mlflow-venv``; ``$RFTLAB_MLFLOW`` names
    another): the project's venv has only the client, mlflow-skinny (pyproject.toml's track extra). Missing,
    the test skips saying so, except under CI, which builds the venv (``.ci/run``) and must run it."""
    exe = os.environ.get("RFTLAB_MLFLOW") or str(SERVER_VENV / "bin" / "mlflow")
    if not Path(exe).exists():
        message = f"needs the mlflow server at {exe}: run `make mlflow-venv`"
        if os.environ.get("CI"):
            pytest.fail(message + " (CI builds it in .ci/run)")
        pytest.skip(message)
    return exe


@pytest.fixture
def mlflow_server(tmp_path):
    """``(base url, backend store uri)`` of an ``mlflow server`` on a free loopback port."""
    uri = f"sqlite:///{tmp_path / 'mlruns' / 'mlflow.db'}"
    (tmp_path / "mlruns").mkdir()
    port = _free_port()
    log = open(tmp_path / "mlflow-server.log", "wb")  # noqa: SIM115 (closed on teardown)
    argv = [_mlflow_server(), "server", "--backend-store-uri", uri,
            "--default-artifact-root", str(tmp_path / "mlruns" / "artifacts"),
            "--host", "127.0.0.1", "--port", str(port), "--workers", "1"]  # fmt: skip
    server = subprocess.Popen(
        argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, cwd=tmp_path
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                with urllib.request.urlopen(base + "/health", timeout=2):
                    break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(
                        f"mlflow server did not start: {(tmp_path / 'mlflow-server.log').read_text()[-2000:]}"
                    )
                time.sleep(0.5)
        yield base, uri
    finally:
        for sig, wait in ((signal.SIGTERM, 5), (signal.SIGKILL, 10)):
            try:
                os.killpg(server.pid, sig)
            except ProcessLookupError:
                break
            try:
                server.wait(timeout=wait)
                break
            except subprocess.TimeoutExpired:
                continue
        log.close()


@pytest.fixture
def browser():
    driver = chromium()
    try:
        yield driver
    finally:
        driver.quit()


def _wait(predicate, seconds: float, what: str):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.5)
    pytest.fail(f"timed out after {seconds:.0f} s waiting for {what}")


def _not_blank(png: Path, box: dict) -> int:
    """How many pixels inside the chart's box are neither white nor grey (the curve's colour)."""
    from PIL import Image

    image = Image.open(png).convert("RGB")
    left, top = int(box["x"]), int(box["y"])
    crop = image.crop((left, top, left + int(box["width"]), top + int(box["height"])))
    return sum(1 for r, g, b in crop.getdata() if max(r, g, b) - min(r, g, b) > 60)


@pytest.mark.slow
def test_mlflow_ui_draws_the_curve_live(tmp_path, monkeypatch, mlflow_server, browser):
    from mlflow.tracking import MlflowClient

    base, uri = mlflow_server
    monkeypatch.setenv("RFTLAB_TRACKING", "mlflow")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    run, _ = RunStore(tmp_path / "runs").start_or_reuse("gs1_vs_grpo", "gs1", {"k": 1})
    stop, steps = threading.Event(), [0]

    def train():  # bounded: at most 400 rows, one every 0.3 s
        while not stop.is_set() and steps[0] < 400:
            run.append_metrics({"step": steps[0], "reward": (steps[0] % 17) / 16})
            steps[0] += 1
            stop.wait(0.3)

    thread = threading.Thread(target=train, daemon=True)
    thread.start()
    try:
        _wait(lambda: steps[0] >= 5, 60, "the first rows")
        assert tracking.flush()
        client = MlflowClient(tracking_uri=uri)
        exp = client.get_experiment_by_name("gs1_vs_grpo")
        assert exp is not None
        (found,) = client.search_runs([exp.experiment_id])
        run_id = found.info.run_id
        browser.get(f"{base}/#/experiments/{exp.experiment_id}/runs/{run_id}/model-metrics")
        first = _wait(lambda: len(browser.execute_script(DRAWN)), 120, "the chart's points")
        browser.save_screenshot(str(tmp_path / "mlflow-ui-first.png"))
        # no reload: the page's own auto-refresh draws the rows appended since
        later = _wait(
            lambda: n if (n := len(browser.execute_script(DRAWN))) > first else 0,
            150,
            f"more than {first} points on the chart",
        )
        served = browser.execute_async_script(
            "const done = arguments[arguments.length - 1];"
            f"fetch('/ajax-api/2.0/mlflow/metrics/get-history?run_id={run_id}&metric_key=reward')"
            ".then(r => r.json()).then(j => done(j.metrics.map(m => [m.step, m.value])))"
        )
        shot = tmp_path / "mlflow-ui-live-curve.png"
        browser.save_screenshot(str(shot))
        chart = browser.find_element("css selector", ".js-plotly-plot").rect
    finally:
        stop.set()
        thread.join(timeout=30)
    written = {r["step"]: r["reward"] for r in run.metrics()}
    assert later <= len(served) <= len(written)
    assert all(written[step] == value for step, value in served)  # the page's data is the store's rows
    assert "reward" in browser.find_element("tag name", "body").text
    assert _not_blank(shot, chart) > 200, f"the chart in {shot} looks blank"
