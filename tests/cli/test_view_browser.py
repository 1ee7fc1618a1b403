"""``rftlab view``: a run's rollouts in eval-protocol's log viewer, checked in a real headless Chromium.

A small local spectrum GRPO run (the run store's real writer, the simulated policy) and a GS1-style run
with text transcripts are written to a temporary store; ``rftlab view`` serves them on 127.0.0.1 (the rows
reach the page over its websocket, ``rftlab.rollout.viewer_server``); Debian's Chromium, driven by
selenium, loads the page, finds the run's rollouts listed (tagged with experiment/arm and run id), opens
one and reads its transcript and reward. Hostile transcripts (markup, script, event handlers) stay text:
no payload creates an element or runs. The browser runs with background networking off and there is no
route out of the machine: the page works offline.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("eval_protocol")

from headless_chromium import chromium  # noqa: E402

from rftlab.rollout.viewer import ViewerError, free_port, rows_from_path  # noqa: E402
from rftlab.runs import RunStore  # noqa: E402


def make_store(root: Path) -> tuple[Path, Path]:
    """A GS1-like run with text rollouts and an eval, and a spectrum-like run without transcripts."""
    store = RunStore(root)
    gs1 = store.create_run("gs1_vs_grpo", "grpo_gs8", {"arm": "grpo_gs8", "k": 1}, backend="local")
    gs1.write_rollouts(0, [
        {"step": 0, "prompt_id": "train-7", "sample": 0, "reward": 1.0, "response": "7+1=8 \\boxed{8}"},
        {"step": 0, "prompt_id": "train-7", "sample": 1, "reward": 0.0, "response": "7+1=9 \\boxed{9}"},
    ])  # fmt: skip
    gs1.write_eval([{"item_id": "test-0", "correct": 1, "response": "2*3=6 \\boxed{6}", "answer": "6"}])
    gs1.finish()
    spec = store.create_run("spectrum_memory", "A", {"arm": "A", "k": 2}, backend="local")
    spec.write_rollouts(0, [{"row_id": "sc1_0", "candidate": 0, "reward": 1.39, "memory_gain": -0.02,
                             "carry_rate": 0.93, "epoch": 0}])  # fmt: skip
    spec.finish()
    return gs1.path, spec.path


def test_rows_carry_experiment_arm_run_and_epoch(tmp_path):
    gs1_path, spec_path = make_store(tmp_path / "runs")
    rows = rows_from_path(tmp_path / "runs")
    assert len(rows) == 4
    tags = [(r.input_metadata.session_data["arm"], r.input_metadata.session_data["epoch"]) for r in rows]
    assert tags == [("grpo_gs8", 0), ("grpo_gs8", 0), ("grpo_gs8", "eval"), ("A", 0)]
    text = rows[0]
    assert text.eval_metadata.name == "gs1_vs_grpo/grpo_gs8"
    assert text.execution_metadata.run_id == gs1_path.name
    assert text.execution_metadata.experiment_id == "gs1_vs_grpo"
    assert text.messages[-1].content == "7+1=8 \\boxed{8}" and text.evaluation_result.score == 1.0
    assert rows[2].input_metadata.row_id == "test-0"
    sim = rows[3]
    assert sim.evaluation_result.score == pytest.approx(1.39)
    assert "No transcript recorded" in sim.messages[0].content
    # out-of-[0, 1] values leave the metrics (the viewer rejects them) but stay visible and exact
    assert (
        "memory_gain" not in sim.evaluation_result.metrics
        and "memory_gain = -0.02" in sim.evaluation_result.reason
    )
    assert sim.evaluation_result.metrics["carry_rate"].score == pytest.approx(0.93)
    assert sim.input_metadata.session_data["values"]["memory_gain"] == pytest.approx(-0.02)
    assert len({r.execution_metadata.rollout_id for r in rows}) == 4


def test_a_fireworks_epoch_file_is_read_as_the_evaluation_rows_it_is(tmp_path):
    store = RunStore(tmp_path / "runs")
    run = store.create_run("spectrum_memory", "probe", {"arm": "probe"}, backend="fireworks")
    row = {"messages": [{"role": "system", "content": "sys"}, {"role": "assistant", "content": "report"}],
           "input_metadata": {"row_id": "sc1_3"},
           "evaluation_result": {"score": 0.42, "is_score_valid": True, "reason": "occ",
                                 "metrics": {"mean_occ": {"score": 0.4, "is_score_valid": True, "reason": "x"},
                                             "memory_gain": {"score": -0.1, "is_score_valid": True, "reason": "y"}}}}  # fmt: skip
    run.save_provider_snapshot("epoch-2-0-eval_results_dataset.jsonl", json.dumps(row) + "\n")
    run.write_rollouts(2, [{"index": 0, "row_id": "sc1_3", "reward": 0.42, "metrics": {}}])
    (got,) = rows_from_path(run.path)  # the raw row wins over its summary record
    assert got.messages[1].content == "report" and got.evaluation_result.score == 0.42
    assert got.input_metadata.session_data["epoch"] == 2 and got.input_metadata.row_id == "sc1_3"
    assert (
        set(got.evaluation_result.metrics) == {"mean_occ"}
        and "memory_gain = -0.1" in got.evaluation_result.reason
    )


def test_nothing_to_show_is_a_clear_error(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(ViewerError, match="no rollouts found"):
        rows_from_path(tmp_path / "empty")
    with pytest.raises(ViewerError, match="no such file"):
        rows_from_path(tmp_path / "missing")


def _browser():
    return chromium()


def _wait_for(driver, predicate, timeout=60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            value = predicate()
        except Exception:  # the page is still rendering
            value = None
        if value:
            return value
        time.sleep(0.5)
    raise AssertionError(f"timed out; the page shows:\n{driver.find_element('tag name', 'body').text[:2000]}")


def _serve(path: Path) -> tuple[subprocess.Popen, int]:
    """``rftlab view PATH`` on a free port, once it printed its address."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "rftlab.cli", "view", str(path), "--port", str(port)],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})  # fmt: skip
    if not proc.stdout.readline().startswith("viewer: http://127.0.0.1:"):
        proc.kill()
        raise AssertionError("the viewer printed no address line")
    return proc, port


def _stop(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()


@pytest.mark.slow
def test_viewer_lists_the_runs_rollouts_and_shows_a_transcript_with_its_reward(tmp_path):
    from selenium.webdriver.common.by import By

    gs1_path, _ = make_store(tmp_path / "runs")
    assert len(rows_from_path(gs1_path)) == 3
    proc, port = _serve(gs1_path)
    driver = None
    try:
        driver = _browser()
        driver.get(f"http://127.0.0.1:{port}/")
        assert driver.title == "EP | Log Viewer"
        body = lambda: driver.find_element(By.TAG_NAME, "body").text  # noqa: E731
        _wait_for(driver, lambda: "Showing all 3 rows" in body())
        listing = body()
        listed = [r.text for r in driver.find_elements(By.CSS_SELECTOR, "tbody tr") if r.text.strip()]
        assert sum("gs1_vs_grpo/grpo_gs8" in r for r in listed) == 3, listed
        assert gs1_path.name in listing  # the run id column
        assert "1.000" in listing and "0.000" in listing  # the rewards, as the viewer prints scores
        # open the first rollout: its transcript and its reward
        rows = driver.find_elements(By.CSS_SELECTOR, "tbody tr")
        # the training rollout with reward 1 (rollout id .../e0/0); the eval item also scores 1.000
        target = next(r for r in rows if r.text.rstrip().endswith("/e0/0"))
        assert "1.000" in target.text
        for _attempt in range(3):  # a click before the table's handlers are attached does nothing
            target.find_element(By.CSS_SELECTOR, "td").click()
            try:
                detail = _wait_for(driver, lambda: "boxed{8}" in body() and body(), timeout=20)
                break
            except AssertionError:
                continue
        else:
            raise AssertionError(f"the row did not open; the page shows:\n{body()[:2000]}")
        assert "7+1=8" in detail
        assert "reward 1" in detail  # the evaluation's reason names the reward
        driver.save_screenshot(str(tmp_path / "viewer.png"))
    finally:
        if driver is not None:
            driver.quit()
        _stop(proc)


HOSTILE = [
    '<img src=x id="planted-img" onerror="window.__pwned=1">',
    '<script id="planted-script">window.__pwned=2</script>',
    '"><svg id="planted-svg" onload="window.__pwned=3"></svg>',
    '<a id="planted-link" href="javascript:window.__pwned=4">x</a> <b id=planted-b>bold</b>',
]


@pytest.mark.slow
def test_hostile_transcripts_stay_text_and_create_no_element(tmp_path):
    """Markup in a prompt, a response, a tool message and a row id reaches the page over the websocket as
    data: it is shown as text, and no element the payloads name exists, and none of them ran."""
    from selenium.webdriver.common.by import By

    store = RunStore(tmp_path / "runs")
    run = store.create_run("gs1_vs_grpo", "hostile", {"arm": "hostile"}, backend="local")
    run.write_rollouts(0, [
        {"prompt_id": HOSTILE[0], "reward": 1.0, "prompt": HOSTILE[1], "response": HOSTILE[2]},
        {"prompt_id": "p1", "reward": 0.0, "messages": [{"role": "user", "content": HOSTILE[3]},
                                                         {"role": "tool", "content": HOSTILE[0]},
                                                         {"role": "assistant", "content": HOSTILE[1]}]},
    ])  # fmt: skip
    run.finish()
    proc, port = _serve(run.path)
    driver = None
    try:
        driver = _browser()
        driver.get(f"http://127.0.0.1:{port}/")
        body = lambda: driver.find_element(By.TAG_NAME, "body").text  # noqa: E731
        _wait_for(driver, lambda: "Showing all 2 rows" in body())
        for row in [r for r in driver.find_elements(By.CSS_SELECTOR, "tbody tr") if r.text.strip()]:
            for _attempt in range(3):
                row.find_element(By.CSS_SELECTOR, "td").click()
                try:
                    _wait_for(driver, lambda: "planted-" in body() and body(), timeout=20)
                    break
                except AssertionError:
                    continue
        shown = body()
        for text in ("planted-script", "planted-svg", "planted-link", "window.__pwned=1"):
            assert text in shown, shown[:3000]  # the payloads are on the page, as text
        for planted in ("planted-img", "planted-script", "planted-svg", "planted-link", "planted-b"):
            assert driver.find_elements(By.ID, planted) == [], planted
        assert driver.execute_script("return window.__pwned === undefined")
        assert driver.find_elements(By.CSS_SELECTOR, "img[src='x'], svg[onload], a[href^='javascript']") == []
        inline = [
            e.get_attribute("innerHTML") for e in driver.find_elements(By.CSS_SELECTOR, "script:not([src])")
        ]
        assert all(text.strip().startswith("window.SERVER_CONFIG") for text in inline), inline
    finally:
        if driver is not None:
            driver.quit()
        _stop(proc)
