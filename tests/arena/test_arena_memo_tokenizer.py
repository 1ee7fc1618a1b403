"""The simulated learner's memoised tokenizer answers what the arena BPE answers, for every argument the
renderers pass (``add_special_tokens``, ``split_special_tokens``), on first and repeated calls."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from rftlab.training.arena.simulated import _MemoTokenizer, _tokenizer

SPECIALS = ["<|im_start|>", "<|im_end|>", "<|endoftext|>"]
TEXTS = st.lists(
    st.one_of(st.text(max_size=30), st.sampled_from(SPECIALS + ["user\n", '{"a": 1}'])), max_size=6
).map("".join)


@settings(max_examples=150, deadline=None)
@given(TEXTS, st.booleans(), st.sampled_from([None, True, False]))
def test_memoised_encode_equals_the_bpe(text, add_special, split):
    memo = _tokenizer()
    inner = memo._inner
    kwargs = {} if split is None else {"split_special_tokens": split}
    expected = inner.encode(text, add_special_tokens=add_special, **kwargs)
    assert memo.encode(text, add_special, **kwargs) == expected
    again = memo.encode(text, add_special_tokens=add_special, **kwargs)  # from the memo
    assert again == expected
    again.append(-1)  # a caller's list is its own: the memo is not changed through it
    assert memo.encode(text, add_special, **kwargs) == expected


def test_split_special_tokens_is_part_of_the_key():
    memo = _MemoTokenizer(_tokenizer()._inner)
    text = "<|im_start|>user\nhi<|im_end|>"
    whole = memo.encode(text, add_special_tokens=False, split_special_tokens=False)
    split = memo.encode(text, add_special_tokens=False, split_special_tokens=True)
    assert whole != split  # the special tokens as one symbol each, or spelled out in bytes
    assert len(whole) < len(split)
    assert memo.encode(text, add_special_tokens=False, split_special_tokens=False) == whole


def test_unhashable_keyword_is_passed_through_unmemoised():
    class Recorder:
        calls = 0

        def encode(self, text, add_special_tokens=True, **kwargs):
            Recorder.calls += 1
            return [len(text), len(kwargs)]

    memo = _MemoTokenizer(Recorder())
    assert memo.encode("abc", extra=[1]) == [3, 1]
    assert memo.encode("abc", extra=[1]) == [3, 1]
    assert Recorder.calls == 2  # never memoised
    memo.encode("abc", extra=(1,))
    memo.encode("abc", extra=(1,))
    assert Recorder.calls == 3  # a hashable value is
