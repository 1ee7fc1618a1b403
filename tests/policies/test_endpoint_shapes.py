"""Class 7 of issue 24: ``rftlab endpoint check`` on the shapes real servers send — tool arguments as a
JSON object, ``content`` as a list of parts, ``tool_calls`` that is not a list, no choices, a body that is
not JSON — through the real ``openai`` client against a stand-in HTTP server (a stand-in for whatever
OpenAI-compatible server a user points the check at: it answers ``/models`` and ``/chat/completions``
with a scripted body). Never a traceback; a failure is one line naming what is wrong."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rftlab.cli import main
from rftlab.rollout.spectrum.endpoint_check import check_endpoint

KEY = "sk-shape-test-0123456789abcdef"


class Stub:
    """The scripted reply of the stand-in server (``body`` bytes and ``status``)."""

    body: bytes = b"{}"
    status: int = 200
    models: bytes = json.dumps({"object": "list", "data": [{"id": "m"}]}).encode()


class Handler(BaseHTTPRequestHandler):
    def _send(self, status: int, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):  # noqa: N802
        self._send(200, Stub.models)

    def do_POST(self):  # noqa: N802
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self._send(Stub.status, Stub.body)

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def base_url():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()


def reply(message, finish="tool_calls", **extra):
    return json.dumps({"id": "x", "object": "chat.completion", "choices": [{"index": 0, "message": message,
                       "finish_reason": finish}], **extra}).encode()  # fmt: skip


def call(arguments, name="submit_report"):
    return {"id": "c1", "type": "function", "function": {"name": name, "arguments": arguments}}


def _check(base_url, body, status=200):
    Stub.body, Stub.status = body, status
    return check_endpoint(base_url, "m", timeout=10)


def _detail(report, name):
    return next(c for c in report.checks if c["name"] == name)


def test_arguments_as_an_object_pass_and_say_so(base_url):
    r = _check(
        base_url, reply({"role": "assistant", "content": None, "tool_calls": [call({"center_freqs": [5.0]})]})
    )
    d = _detail(r, "tool_call")
    assert r.passed and d["passed"] and "arrived as a JSON object" in d["detail"]


def test_content_as_a_list_of_parts_is_read_as_text(base_url):
    r = _check(
        base_url, reply({"role": "assistant", "content": [{"type": "text", "text": "no tool today"}]}, "stop")
    )
    d = _detail(r, "tool_call")
    assert not r.passed and "no submit_report tool call; text: 'no tool today'" in d["detail"]


@pytest.mark.parametrize("calls", [7, "submit_report", {"function": {}}, [7, "x"], [{"function": 3}]])
def test_tool_calls_that_are_not_a_list_of_calls_fail_in_one_line(base_url, calls):
    r = _check(base_url, reply({"role": "assistant", "content": "", "tool_calls": calls}))
    d = _detail(r, "tool_call")
    assert not r.passed and not d["passed"] and "\n" not in d["detail"]
    if not isinstance(calls, list):
        assert f"tool_calls is a {type(calls).__name__}, not a list" in d["detail"]


@pytest.mark.parametrize(
    "body, why",
    [
        (b"not json at all", "JSONDecodeError"),
        (json.dumps({"choices": []}).encode(), "no choices[0]"),
        (json.dumps({"choices": [{"message": "hi"}]}).encode(), "no message object"),
        (json.dumps([1, 2]).encode(), "no choices[0]"),
    ],
)
def test_replies_without_a_message_fail_the_chat_check(base_url, body, why):
    r = _check(base_url, body)
    d = _detail(r, "chat")
    assert not d["passed"] and why in d["detail"]


def test_an_error_body_is_redacted_before_it_is_cut(base_url, monkeypatch, capsys):
    """The key placed at every position around the 400-character cut: no 8 characters of it print."""
    monkeypatch.setenv("RFTLAB_SHAPE_KEY", KEY)
    pieces = {KEY[i : i + 8] for i in range(len(KEY) - 7)}
    for pad in range(290, 400, 7):
        Stub.body, Stub.status = (
            json.dumps({"error": {"message": "x" * pad + KEY + " rejected"}}).encode(),
            401,
        )
        code = main(
            ["endpoint", "check", "--base-url", base_url, "--model", "m", "--api-key-env", "RFTLAB_SHAPE_KEY"]
        )
        out = capsys.readouterr().out
        assert code == 1 and "HTTP 401" in out
        assert not [p for p in pieces if p in out], (pad, out)


JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=10,
)
MESSAGES = st.fixed_dictionaries(
    {},
    optional={
        "role": JSON,
        "content": JSON | st.lists(st.fixed_dictionaries({"type": st.just("text"), "text": JSON})),
        "tool_calls": JSON
        | st.lists(
            st.fixed_dictionaries(
                {
                    "id": JSON,
                    "function": st.fixed_dictionaries(
                        {
                            "name": st.just("submit_report") | JSON,
                            "arguments": JSON
                            | st.builds(json.dumps, st.dictionaries(st.just("center_freqs"), JSON)),
                        }
                    ),
                }  # fmt: skip
            ),
            max_size=2,
        ),
    },
)


@settings(max_examples=120, deadline=None)
@given(message=MESSAGES | JSON, finish=JSON)
def test_any_reply_shape_gives_a_report_never_a_traceback(base_url, message, finish):
    report = _check(base_url, reply(message, finish))
    names = [c["name"] for c in report.checks]
    assert names[:1] == ["models"] and "chat" in names
    assert all(
        isinstance(c["detail"], str) and "\n" not in c["detail"] and len(c["detail"]) <= 400
        for c in report.checks
    )
    json.dumps(report.to_dict(), allow_nan=False)
    if report.passed:
        # the check reads the first call named submit_report (calls before it may be anything)
        args = next(
            c
            for c in message["tool_calls"]
            if isinstance(c, dict)
            and isinstance(c.get("function"), dict)
            and c["function"].get("name") == "submit_report"
        )["function"]["arguments"]
        parsed = args if isinstance(args, dict) else json.loads(args)
        assert isinstance(parsed["center_freqs"], list)
