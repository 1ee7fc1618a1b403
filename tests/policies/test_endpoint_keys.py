"""A key that no HTTP header can carry (non-ASCII, a control character) is refused in one line that names
its position, never its text; before, every endpoint check failed with a bare ``UnicodeEncodeError``."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rftlab.policies.endpoint import EndpointKeyError, resolve_key
from rftlab.rollout.spectrum.endpoint_check import check_endpoint

PRINTABLE = st.text(alphabet=st.characters(min_codepoint=33, max_codepoint=126), min_size=1, max_size=40)


@settings(max_examples=80, deadline=None)
@given(
    PRINTABLE,
    st.characters(blacklist_categories=("Cs",)).filter(lambda c: c != "\x00" and not (" " < c <= "~")),
    PRINTABLE,
)
def test_a_key_with_a_character_no_header_carries_is_refused_without_its_text(head, bad, tail):
    key = "sk-" + head + bad + tail
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RFTLAB_TEST_KEY", key)
        with pytest.raises(EndpointKeyError) as exc:
            resolve_key("RFTLAB_TEST_KEY")
        report = check_endpoint("http://127.0.0.1:9/v1", "m", api_key_env="RFTLAB_TEST_KEY", timeout=1)
    message = str(exc.value)
    assert f"position {len('sk-' + head) + 1} of {len(key)}" in message
    assert key not in message
    ((check,),) = [report.checks]
    assert check["name"] == "client" and not check["passed"] and check["detail"] == message
    assert key not in str(report.to_dict())


@settings(max_examples=40, deadline=None)
@given(PRINTABLE)
def test_a_printable_ascii_key_is_used_as_given(key):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RFTLAB_TEST_KEY", key)
        assert resolve_key("RFTLAB_TEST_KEY") == (key, True)
