"""Credentials never reach the disk: raw-byte matching of every credential variable (issue 9 §5)."""

from __future__ import annotations

import json
import urllib.parse

import pandas as pd
import pytest

from rftlab.runs import RunStore, SecretLeakError, assert_no_secrets, load_run
from rftlab.runs.secrets import MIN_SECRET_LENGTH, credential_values, secret_forms

# A key with a quote, a backslash, a slash and non-ASCII characters: every escaping path differs.
NASTY = 'k"ey\\with/é-λ-0123456789'


@pytest.mark.parametrize(
    ("name", "is_credential"),
    [
        ("FIREWORKS_API_KEY", True),
        ("TINKER_API_KEY", True),
        ("HF_TOKEN", True),
        ("OPENAI_API_KEY", True),
        ("ANTHROPIC_API_KEY", True),
        ("AWS_SECRET_ACCESS_KEY", True),
        ("CLIENT_SECRET", True),
        ("DB_PASSWORD", True),
        ("PGPASSWORD", True),
        ("my_app_token", True),
        ("PATH", False),
        ("KEYBOARD", False),
        ("TOKENIZERS_PARALLELISM", False),
        ("TINKER_CREDENTIAL_CMD", False),
    ],
)
def test_which_variables_are_credentials(name, is_credential):
    assert (name in credential_values({name: "v" * 20})) is is_credential


def test_short_values_are_not_matched_and_why():
    # OPENAI_API_KEY=dummy is required offline by eval-protocol; matching it would refuse any file
    # that mentions "dummy". Real keys are 20+ characters.
    assert MIN_SECRET_LENGTH == 8
    assert credential_values({"OPENAI_API_KEY": "dummy", "HF_TOKEN": "1234567"}) == {}
    assert credential_values({"HF_TOKEN": "12345678"}) == {"HF_TOKEN": "12345678"}


@pytest.mark.parametrize(
    "serialise",
    [
        lambda v: v.encode("utf-8"),
        lambda v: json.dumps({"k": v}).encode(),
        lambda v: json.dumps({"k": v}, ensure_ascii=False).encode("utf-8"),
        lambda v: json.dumps({"k": v}, indent=2).encode(),
        lambda v: pd.DataFrame([{"k": v}]).to_json(orient="records", lines=True).encode("utf-8"),
        lambda v: pd.DataFrame([{"k": v}]).to_csv(index=False).encode("utf-8"),
        lambda v: repr({"k": v}).encode("utf-8"),
        lambda v: ("https://x/?key=" + urllib.parse.quote(v, safe="")).encode(),
        lambda v: v.encode("utf-16-le"),
    ],
    ids=["raw", "json-ascii", "json-utf8", "json-indent", "pandas-json", "csv", "repr", "url", "utf16"],
)
def test_a_nasty_key_is_found_in_every_serialised_form(serialise):
    env = {"MY_API_KEY": NASTY}
    data = b"prefix " + serialise(NASTY) + b" suffix"
    with pytest.raises(SecretLeakError) as caught:
        assert_no_secrets(data, "out.json", environ=env)
    message = str(caught.value)
    assert "$MY_API_KEY" in message and "out.json" in message
    assert all(form.decode("utf-8", "replace") not in message for form in secret_forms(NASTY))
    # And nothing is flagged when the key is not there.
    assert_no_secrets(serialise("some other value 987654"), "out.json", environ=env)


def test_the_forms_differ_from_the_raw_key():
    forms = secret_forms(NASTY)
    assert NASTY.encode() in forms and json.dumps(NASTY)[1:-1].encode() in forms
    assert len(forms) >= 5


@pytest.fixture
def nasty_env(monkeypatch):
    for name in ("FIREWORKS_API_KEY", "TINKER_API_KEY", "HF_TOKEN", "OPENAI_API_KEY"):
        monkeypatch.setenv(name, f"{NASTY}-{name}")
    return {name: f"{NASTY}-{name}" for name in ("FIREWORKS_API_KEY", "HF_TOKEN")}


def _no_key_on_disk(root, values):
    for path in root.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            for value in values:
                for form in secret_forms(value):
                    assert form not in data, (path, value)


def test_every_run_store_write_is_checked(tmp_path, nasty_env):
    key = nasty_env["HF_TOKEN"]
    store = RunStore(tmp_path / "runs")
    with pytest.raises(SecretLeakError, match=r"\$HF_TOKEN"):
        store.create_run("e", "a", {"token": key})
    assert not (tmp_path / "runs" / "e" / "a").exists() or not any((tmp_path / "runs" / "e" / "a").iterdir())
    run = store.create_run("e", "a", {"model": "m"})
    refused = [
        lambda: run.append_metrics({"step": 0, "note": key}),
        lambda: run.write_rollouts(0, [{"completion": f"I found {key} in the logs"}]),
        lambda: run.write_eval([{"item_id": key, "correct": 1}]),
        lambda: run.save_provider_snapshot("job.json", {"headers": {"Authorization": f"Bearer {key}"}}),
        lambda: run.save_provider_snapshot("raw.txt", f"token={key}"),
        lambda: run.save_provider_snapshot("raw.bin", key.encode("utf-8")),
        lambda: run.set_provider(token=key),
        lambda: run.finish("failed", error=f"auth failed for {key}"),
    ]
    for write in refused:
        with pytest.raises(SecretLeakError):
            write()
    # Refused writes leave the handle usable and the record clean.
    assert run.record.provider == {} and run.record.status == "running" and run.record.error is None
    run.append_metrics({"step": 0, "reward": 1.0})
    run.set_provider(job="accounts/x/rftJobs/1")
    run.finish()
    reopened = load_run(run.path)
    assert reopened.record.status == "finished" and reopened.record.provider == {
        "job": "accounts/x/rftJobs/1"
    }
    _no_key_on_disk(tmp_path, [NASTY, *nasty_env.values()])
    assert not list(tmp_path.rglob("*.rftlab-tmp"))


def test_a_refused_finish_can_be_retried(tmp_path, monkeypatch):
    monkeypatch.setenv("TINKER_API_KEY", "tml-" + "z" * 30)
    run = RunStore(tmp_path).create_run("e", "a", {})
    with pytest.raises(SecretLeakError):
        run.finish("failed", error="401 for key tml-" + "z" * 30)
    assert not run.finished
    run.finish("failed", error="401 unauthorised")
    assert load_run(run.path).record.status == "failed"


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@settings(max_examples=150, deadline=None)
@given(
    value=st.text(min_size=8, max_size=30).filter(lambda v: "\x00" not in v),
    ensure_ascii=st.booleans(),
    indent=st.sampled_from([None, 2]),
)
def test_any_key_is_found_in_its_json_serialisation(value, ensure_ascii, indent):
    env = {"ANY_API_KEY": value}
    data = json.dumps({"payload": ["x", {"k": value}]}, ensure_ascii=ensure_ascii, indent=indent)
    try:
        encoded = data.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate cannot be written as UTF-8 by anyone
        return
    with pytest.raises(SecretLeakError):
        assert_no_secrets(encoded, "f.json", environ=env)


@settings(max_examples=100, deadline=None)
@given(data=st.binary(max_size=200), value=st.text(min_size=8, max_size=20))
def test_assert_no_secrets_only_ever_raises_secret_leak_error(data, value):
    try:
        assert_no_secrets(data, "f", environ={"X_TOKEN": value})
    except SecretLeakError:
        assert any(form in data for form in secret_forms(value))
