"""Class 2 of issue 24: every encoded form of every credential variable is refused on disk and masked on the
terminal — raw, JSON-escaped, double-escaped, URL-encoded, repr, base64 at all three alignments — for
every variable named ``*_KEY``, ``*_TOKEN``, ``*_SECRET`` or ``*PASSWORD*``; and text is redacted before it
is cut."""

from __future__ import annotations

import base64
import json
import urllib.parse

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rftlab.runs import RunStore, SecretLeakError, assert_no_secrets
from rftlab.runs.secrets import redact_text, redact_url, secret_forms, url_credential_problem

NAMES = st.sampled_from(
    [
        "FIREWORKS_API_KEY",
        "HF_TOKEN",
        "CLIENT_SECRET",
        "DB_PASSWORD",
        "PGPASSWORD_FILE",
        "my_api_key",
        "X_TOKEN",
    ]
)
# Keys as providers issue them (letters, digits, - _ .), and nastier ones (quotes, slashes, non-ASCII).
KEYS = st.one_of(
    st.text(
        st.sampled_from("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_."),
        min_size=8,
        max_size=48,
    ),
    st.text(st.characters(blacklist_categories=("Cs", "Cc")), min_size=8, max_size=24).filter(
        lambda k: k.strip() == k and k.strip()
    ),
)
FILLER = st.text(st.characters(blacklist_categories=("Cs",)), max_size=30)


def _b64_at(key: str, offset: int, prefix: bytes, suffix: bytes) -> str:
    """The key inside a base64 text, starting at byte ``offset`` (mod 3) of the encoded payload."""
    return base64.b64encode(prefix[:offset] + key.encode("utf-8") + suffix).decode("ascii")


ENCODINGS = {
    "raw": lambda k: k,
    "json": lambda k: json.dumps({"k": k}),
    "json-ascii": lambda k: json.dumps({"k": k}, ensure_ascii=True),
    "json-utf8": lambda k: json.dumps({"k": k}, ensure_ascii=False),
    "double-escaped": lambda k: json.dumps({"body": json.dumps({"api_key": k})}),
    "double-escaped-utf8": lambda k: json.dumps(
        {"body": json.dumps({"api_key": k}, ensure_ascii=False)}, ensure_ascii=False
    ),
    "url": lambda k: "https://h/?x=" + urllib.parse.quote(k, safe=""),
    "url-plus": lambda k: "a=" + urllib.parse.quote_plus(k),
    "url-keep-slash": lambda k: "/p/" + urllib.parse.quote(k),
    "repr": lambda k: repr({"k": k}),
    "repr-bytes": lambda k: repr(k.encode("utf-8")),
    "repr-of-json": lambda k: str({"detail": json.dumps({"api_key": k})}),
    "repr-of-json-bytes": lambda k: repr(json.dumps({"api_key": k}).encode("utf-8")),
    "eval-protocol-partial": lambda k: "  Resolved FIREWORKS_API_KEY: " + "********" + k[-4:],
    "head-tail": lambda k: f"key {k[:6]}...{k[-4:]} refused",
    "base64-0": lambda k: _b64_at(k, 0, b"", b"--"),
    "base64-1": lambda k: _b64_at(k, 1, b"x", b"yz"),
    "base64-2": lambda k: _b64_at(k, 2, b"xy", b"z"),
    "base64url-1": lambda k: base64.urlsafe_b64encode(b"\xff" + k.encode() + b"\xfe\xfd").decode(),
    "base64-json-2": lambda k: base64.b64encode(b"{x" + json.dumps({"k": k}).encode()).decode(),
}


@settings(max_examples=60, deadline=None)
@given(name=NAMES, key=KEYS, encoding=st.sampled_from(sorted(ENCODINGS)), before=FILLER, after=FILLER)
def test_every_form_is_refused_on_disk_and_masked_on_the_terminal(name, key, encoding, before, after):
    encoded = ENCODINGS[encoding](key)
    text = f"{before}{encoded}{after}"
    env = {name: key}
    with pytest.raises(SecretLeakError) as caught:
        assert_no_secrets(text.encode("utf-8", "surrogatepass"), "out.json", environ=env)
    assert f"${name}" in str(caught.value)
    assert not any(f.decode("utf-8", "replace") in str(caught.value) for f in secret_forms(key))
    masked = redact_text(text, environ=env)
    assert encoded not in masked or encoded == "", encoding
    left = [f for f in secret_forms(key) if f.decode("utf-8", "replace") in masked and len(f) >= 8]
    assert not left, (encoding, left)


@settings(max_examples=40, deadline=None)
@given(key=KEYS, noise=FILLER)
def test_text_without_the_key_is_left_alone(key, noise):
    clean = f"the job {noise} finished"
    if any(f.decode("utf-8", "replace") in clean for f in secret_forms(key)):
        return  # the noise happened to contain the key
    assert redact_text(clean, environ={"A_TOKEN": key}) == clean


@pytest.mark.parametrize("encoding", sorted(ENCODINGS))
def test_the_run_store_refuses_each_form_and_writes_nothing(encoding, tmp_path, monkeypatch):
    key = 'fw-"quoted"/slash\\back-ключ-0123456789'
    monkeypatch.setenv("FIREWORKS_API_KEY", key)
    run = RunStore(tmp_path / "runs").create_run("e", "a", {"x": 1})
    before = {p: p.read_bytes() for p in run.path.rglob("*") if p.is_file()}
    with pytest.raises(SecretLeakError):
        run.save_provider_snapshot("firectl_calls.jsonl", ENCODINGS[encoding](key) + "\n")
    with pytest.raises(SecretLeakError):
        run.save_provider_snapshot("job_create.json", {"body": ENCODINGS[encoding](key)})
    assert {p: p.read_bytes() for p in run.path.rglob("*") if p.is_file()} == before


@settings(max_examples=60, deadline=None)
@given(key=KEYS, at=st.integers(0, 420), limit=st.integers(20, 400))
def test_redaction_happens_before_the_cut(key, at, limit):
    """The endpoint check's cleaner: whatever the key's position relative to the cut, no part of it of 4+
    characters survives."""
    from rftlab.rollout.spectrum.endpoint_check import _Clean

    text = "x" * at + key + "y" * 50
    shown = _Clean([key])(text, limit)
    assert len(shown) <= limit
    tokens = [key[i : i + 8] for i in range(0, max(1, len(key) - 7))]
    assert not any(t in shown for t in tokens if t.strip("xy")), shown


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("http://user:sk-123456789@127.0.0.1:8000/v1", "password in its user-info"),
        ("https://h/v1?api_key=abc", "query parameter 'api_key'"),
        ("https://h/v1?token=abc", "query parameter 'token'"),
        ("http://127.0.0.1:8011/v1", None),
        ("https://api.fireworks.ai/inference/v1", None),
    ],
)
def test_url_credentials_are_named(url, problem):
    found = url_credential_problem(url, environ={})
    assert (found is None) if problem is None else (problem in found)


def test_a_url_holding_a_variables_value_is_refused_and_masked():
    env = {"OPENAI_API_KEY": "sk-local-0123456789"}
    assert "$OPENAI_API_KEY" in url_credential_problem("http://h/v1/sk-local-0123456789/x", environ=env)
    assert redact_url("http://me:pw-123@h/v1") == "http://me:***@h/v1"
    assert "pw-123" not in redact_text("failed: http://me:pw-123@h/v1 refused", environ={})


@settings(max_examples=80, deadline=None)
@given(key=KEYS, special=st.sampled_from(['"', "\\", '\\"']), at=st.integers(0, 48))
def test_eval_protocols_error_text_is_masked_for_any_key(key, special, at):
    """``rftlab fireworks upload-evaluator`` prints eval-protocol's error text: a JSON error body inside
    a Python ``str`` of a dict (a key with ``"`` or ``\\`` shows as the repr of its JSON-escaped form),
    and eval-protocol's own shortened form (``********`` and the last 4 characters)."""
    key = key[:at] + special + key[at:]
    body = json.dumps({"error": {"message": f"invalid api key {key}"}})
    text = f"upload failed: {dict(status=401, body=body)}\n  Resolved FIREWORKS_API_KEY: ********{key[-4:]}"
    out = redact_text(text, environ={"FIREWORKS_API_KEY": key})
    assert repr(json.dumps(key)[1:-1])[1:-1] not in out
    assert f"********{key[-4:]}" not in out and out.endswith("FIREWORKS_API_KEY: ***")
    assert not [f for f in secret_forms(key) if len(f) >= 8 and f.decode("utf-8", "replace") in out]
