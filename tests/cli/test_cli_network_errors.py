"""Errors when the network is down say what happened, at once.

- The tinker backend's tokenizer: with the Hugging Face Hub unreachable it tries the local cache only and
  fails within seconds with transformers' own message and what to do (before: about a minute of retries,
  then "a file: OSError"); ``$RFTLAB_TOKENIZER`` points it at a local tokenizer folder instead.
- The CLI's ``OSError`` backstop keeps a non-file error's own message.
"""

from __future__ import annotations

import time

import pytest

from rftlab.cli import _os_error_message

pytest.importorskip("tinker_cookbook")

from rftlab.launch.gs1.backend import BackendUnavailable, hub_reachable, tinker_tokenizer  # noqa: E402


def test_an_unreachable_hub_fails_fast_with_transformers_message(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))  # an empty cache
    monkeypatch.delenv("RFTLAB_TOKENIZER", raising=False)
    start = time.perf_counter()
    with pytest.raises(BackendUnavailable) as caught:
        tinker_tokenizer("Qwen/Qwen3.5-2B", reachable=lambda: False)
    elapsed = time.perf_counter() - start
    message = str(caught.value)
    assert "Qwen/Qwen3.5-2B" in message and "huggingface.co" in message
    assert "RFTLAB_TOKENIZER" in message
    assert "local" in message.lower() and "cache" in message.lower()  # transformers' words, kept
    assert elapsed < 30, f"{elapsed:.1f} s: the cache-only attempt must not retry the network"


def test_hub_offline_is_known_without_a_connection(monkeypatch, no_network):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert hub_reachable() is False  # and no_network saw no connection attempt


def test_a_local_tokenizer_folder_is_used_instead_of_the_hub(monkeypatch, tmp_path, no_network):
    from rftlab.training.local_tinker.model import bpe_tokenizer

    folder = tmp_path / "tok"
    bpe_tokenizer().save_pretrained(folder)  # the local backend's offline tokenizer, saved as a folder
    monkeypatch.setenv("RFTLAB_TOKENIZER", str(folder))
    tok = tinker_tokenizer("Qwen/Qwen3.5-2B", reachable=lambda: pytest.fail("the Hub was asked"))
    assert tok.decode(tok.encode("2+2=4")) == "2+2=4"
    monkeypatch.setenv("RFTLAB_TOKENIZER", str(tmp_path / "missing"))
    with pytest.raises(BackendUnavailable, match="is not a folder"):
        tinker_tokenizer("Qwen/Qwen3.5-2B")


def test_gs1_preflight_on_tinker_offline_is_one_clear_line(monkeypatch, tmp_path, capsys):
    from rftlab.cli import main
    from rftlab.launch.gs1 import backend

    monkeypatch.setenv("TINKER_API_KEY", "tml-not-a-real-key-0123456789")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.delenv("RFTLAB_TOKENIZER", raising=False)
    monkeypatch.setattr(backend, "hub_reachable", lambda timeout=3.0: False)  # the network is down
    start = time.perf_counter()
    code = main(["gs1", "preflight", "--backend", "tinker", "--root", str(tmp_path / "runs")])
    err = capsys.readouterr().err
    assert code == 2 and time.perf_counter() - start < 60
    assert err.startswith("rftlab: error: the tinker backend needs the tokenizer of ")
    assert "a file: OSError" not in err and "tml-not-a-real-key" not in err


def test_a_non_file_oserror_keeps_its_message():
    exc = OSError("We couldn't connect to 'https://huggingface.co' to load the files")
    assert (
        _os_error_message(exc) == "OSError: We couldn't connect to 'https://huggingface.co' to load the files"
    )
    assert _os_error_message(FileNotFoundError(2, "No such file or directory", "x.json")).startswith(
        "x.json: "
    )
