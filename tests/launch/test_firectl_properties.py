"""Property tests: whatever firectl or a downloaded rollout file contains, parsing fails only with the
documented error and never leaks a key."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from rftlab.launch.firectl import FirectlError, job_progress, job_state, parse_json_output, redact
from rftlab.launch.fireworks import epoch_metrics
from rftlab.launch.fireworks.poll import _parse_rows, _rollout_record

KEY = st.text(min_size=8, max_size=40).filter(lambda k: "=" not in k and not k.startswith("-"))
TOKENS = st.lists(st.text(alphabet="abcdefghij-_/.:0123456789", min_size=1, max_size=12), max_size=12)


@given(tokens=TOKENS, key=KEY, wandb=KEY, pos=st.integers(0, 12), inline=st.booleans())
def test_redact_hides_both_key_flags_in_both_forms(tokens, key, wandb, pos, inline):
    tokens = [t for t in tokens if key not in t and wandb not in t]
    pos = min(pos, len(tokens))
    secret = [f"--api-key={key}"] if inline else ["--api-key", key]
    argv = tokens[:pos] + secret + tokens[pos:] + ["--wandb-api-key", wandb]
    out = redact(argv)
    assert len(out) == len(argv)
    joined = " ".join(out)
    assert key not in joined and wandb not in joined
    assert [t for t in out if t not in ("***", "--api-key=***", "--api-key", "--wandb-api-key")] == tokens


@settings(max_examples=300)
@given(st.text(max_size=300))
def test_parse_json_output_returns_json_or_raises_firectl_error(text):
    try:
        value = parse_json_output(text, "get")
    except FirectlError:
        return
    json.dumps(value)


JSONISH = st.recursive(
    st.none() | st.booleans() | st.floats() | st.integers() | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=200)
@given(st.lists(JSONISH | st.text(max_size=40), max_size=8))
def test_any_rollout_file_gives_finite_metrics(lines):
    text = "\n".join(line if isinstance(line, str) else json.dumps(line) for line in lines)
    records = [_rollout_record(row, i) for i, row in enumerate(_parse_rows(text))]
    metrics = epoch_metrics(records)
    json.dumps(metrics, allow_nan=False)  # no NaN or Infinity can reach metrics.jsonl
    assert metrics["rollouts"] == len(records)


@given(st.dictionaries(st.text(max_size=12), JSONISH, max_size=6))
def test_job_readers_never_raise(job):
    job_state(job)
    progress = job_progress(job)
    assert set(progress) == {"epoch", "percent", "problems"}
