"""The evaluator id: the real eval-protocol upload code creates the evaluator the launched job points at.

``rftlab fireworks upload-evaluator`` is run for real (staging folder, the running interpreter, eval-protocol
0.3.33's own argument parser and ``upload_command``, the fireworks-ai SDK) with ``FIREWORKS_API_BASE``
pointing at a loopback recorder. The recorder stands in for api.fireworks.ai, which a test cannot reach: it
imitates ``GET /verifyApiKey`` (200 with the ``x-fireworks-account-id`` header eval-protocol reads the
account from) and refuses every other request with 403, as the API does for a key without rights, so the
upload stops at its first evaluator request. That request's path names the evaluator id eval-protocol
actually uses; it must be the id in the job's ``--evaluator`` flag.
"""

from __future__ import annotations

import json
import re

import pytest

from rftlab.cli import main as cli_main
from rftlab.launch.fireworks import (
    FireworksLauncher,
    LaunchRefused,
    evaluator_id,
    evaluator_resource,
    evaluator_upload_argv,
    upload_evaluator,
)
from rftlab.launch.poker.spec import load_poker_arm_spec
from rftlab.launch.spectrum.spec import load_arm_spec
from rftlab.runs.paths import SPECS_DIR
from rftlab.studies.poker import fireworks_launcher

pytest.importorskip("eval_protocol")

KEY = "fw-test-key-not-real-0123456789"
ACCOUNT = "acct-under-test"
EVALUATOR_PATH = re.compile(r"/accounts/([^/]+)/evaluators/([^/?:]+)")
CREATE_PATH = re.compile(r"/accounts/([^/]+)/evaluatorsV2")


@pytest.fixture
def fireworks_recorder(monkeypatch, fireworks_api):
    """eval-protocol's upload talks to the loopback recorder of ``tests/conftest.py``."""
    assert fireworks_api.account == ACCOUNT
    monkeypatch.setenv("FIREWORKS_API_KEY", KEY)
    monkeypatch.setenv("FIREWORKS_API_BASE", fireworks_api.base_url)
    return fireworks_api.calls


def _first_evaluator_request(calls):
    """eval-protocol's first evaluator request: ``POST .../evaluatorsV2`` names the id in its body (rftlab's
    own look-up before the upload, a ``GET`` of the id, is left out: it is not eval-protocol's)."""
    for call in calls:
        m = CREATE_PATH.search(call["path"])
        if m and call["method"] == "POST":
            body = json.loads(call["body"] or "{}")
            return call, m.group(1), body.get("evaluatorId") or body.get("evaluator_id")
        m = EVALUATOR_PATH.search(call["path"])
        if m and call["method"] != "GET":
            return call, m.group(1), m.group(2)
    return None, None, None


CASES = [
    ("spectrum_A.json", load_arm_spec, lambda: FireworksLauncher(account_id=ACCOUNT)),
    ("spectrum_B.json", load_arm_spec, lambda: FireworksLauncher(account_id=ACCOUNT)),
    ("poker_seed.json", load_poker_arm_spec, lambda: fireworks_launcher(ACCOUNT)),
]


@pytest.mark.slow
@pytest.mark.parametrize(("spec_file", "load", "launcher"), CASES, ids=[c[0] for c in CASES])
def test_real_upload_creates_the_evaluator_the_job_points_at(fireworks_recorder, spec_file, load, launcher):
    spec = load(SPECS_DIR / spec_file)
    with pytest.raises(LaunchRefused) as refused:
        upload_evaluator(spec, ACCOUNT, timeout=300)
    call, account, uploaded_id = _first_evaluator_request(fireworks_recorder)
    assert call is not None, f"eval-protocol made no evaluator request: {fireworks_recorder}"
    # the id eval-protocol really sends, the id launch uses, and the job's --evaluator flag agree
    plan = launcher().plan(spec)
    (create,) = [c for c in plan.commands if "--job-id" in c]
    job_evaluator = create[create.index("--evaluator") + 1]
    assert (
        f"accounts/{account}/evaluators/{uploaded_id}" == job_evaluator == evaluator_resource(spec, ACCOUNT)
    )
    assert uploaded_id == evaluator_id(spec, ACCOUNT) == plan.evaluator.rsplit("/", 1)[-1]
    # the failure keeps eval-protocol's own words, whole lines, and says what to check
    message = str(refused.value)
    assert f"Uploading evaluator '{uploaded_id}'" in message
    assert "Failed to upload" in message and "403" in message
    assert "Hint: check FIREWORKS_API_KEY" in message
    assert KEY not in message


def test_eval_protocols_own_cli_ignores_id_which_is_why_the_shim_exists(monkeypatch):
    """The defect the shim works around, shown on eval-protocol's parser (so a fixed release is noticed)."""
    from eval_protocol.cli import build_parser

    from rftlab.launch.ep_upload import parse_upload_args

    monkeypatch.setenv("FIREWORKS_API_KEY", KEY)  # its parser builds a Fireworks client to read signatures
    argv = evaluator_upload_argv("spectrum_memory", "turn", "my-evaluator")[3:]  # after "python -m module"
    raw = build_parser().parse_args(argv)
    assert raw.evaluator_id == "my-evaluator" and getattr(raw, "id", None) is None
    assert parse_upload_args(argv).id == "my-evaluator"


def test_upload_evaluator_uses_the_running_interpreter_and_its_bin_dir(monkeypatch, tmp_path):
    import sys
    from pathlib import Path

    monkeypatch.setenv("FIREWORKS_API_KEY", KEY)
    monkeypatch.setenv("PATH", "/usr/bin:/bin")  # no activated venv
    seen = {}

    class Proc:
        returncode, stdout, stderr = 0, f"Successfully uploaded with {KEY}\n", ""

    def runner(argv, cwd, env, **kw):
        seen.update(argv=argv, env=env)
        return Proc()

    spec = load_arm_spec(SPECS_DIR / "spectrum_A.json")
    record = upload_evaluator(spec, ACCOUNT, runner=runner, lookup=lambda account, ev: None)
    assert seen["argv"][:3] == [sys.executable, "-m", "rftlab.launch.ep_upload"]
    assert seen["env"]["PATH"].split(":")[0] == str(Path(sys.executable).parent)
    assert seen["env"]["LITELLM_LOCAL_MODEL_COST_MAP"] == "True"
    assert KEY not in json.dumps(record) and "***" in record["stdout"]


def test_cli_upload_evaluator_accepts_a_poker_spec(monkeypatch, capsys):
    """``rftlab fireworks upload-evaluator`` reads poker specs too (before, it rejected them)."""
    import rftlab.launch.fireworks as fw

    monkeypatch.setenv("FIREWORKS_API_KEY", KEY)
    got = {}

    def fake_upload(spec, account):  # records what the CLI passes; the upload itself is tested above
        got.update(spec=spec, account=account)
        return {
            "argv": ["python", "-m", "x", "upload"],
            "evaluator_id": "rftlab-poker-mcp",
            "stdout": "",
            "stderr": "",
        }

    monkeypatch.setattr(fw, "upload_evaluator", fake_upload)
    path = str(SPECS_DIR / "poker_seed.json")
    assert cli_main(["fireworks", "upload-evaluator", path, "--account-id", ACCOUNT]) == 0
    assert got["spec"].experiment == "poker" and got["account"] == ACCOUNT
    assert "uploaded evaluator rftlab-poker-mcp for arm seed" in capsys.readouterr().out


@pytest.mark.slow
def test_a_code_upload_that_fails_is_a_failure_not_an_uploaded_evaluator(monkeypatch, capsys):
    """eval-protocol's real upload against the loopback API stub (tests/launch/fireworks_api_stub.py),
    whose signed-URL PUT refuses the tarball with 403: eval-protocol 0.3.33 logs "Code upload failed
    (evaluator created but code not uploaded)" and returns normally; the command must exit non-zero and
    say that the evaluator has no code."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent))
    from fireworks_api_stub import FireworksApiStub

    spec = load_arm_spec(SPECS_DIR / "spectrum_A.json")
    with FireworksApiStub(account=ACCOUNT, put_status=403) as api:
        monkeypatch.setenv("FIREWORKS_API_KEY", KEY)
        monkeypatch.setenv("FIREWORKS_API_BASE", api.base_url)
        code = cli_main(
            ["fireworks", "upload-evaluator", str(SPECS_DIR / "spectrum_A.json"), "--account-id", ACCOUNT]
        )
        calls = list(api.calls)
    err = capsys.readouterr().err
    ev = evaluator_id(spec, ACCOUNT)
    assert code == 2 and "uploaded evaluator" not in capsys.readouterr().out
    assert f"the evaluator '{ev}' was created on Fireworks but its code was not uploaded" in err
    assert "Code upload failed" in err and KEY not in err
    # the real upload went as far as the signed-URL PUT, was refused there, and never validated
    assert ("POST", f"/v1/accounts/{ACCOUNT}/evaluatorsV2") in calls
    assert any(m == "PUT" and p.startswith(f"/upload/{ev}/") for m, p in calls)
    assert not any(p.endswith(":validateUpload") for _, p in calls)
