"""A loopback stand-in for the parts of the Fireworks REST API the firectl launcher's tests reach (the real
API needs an account and the network), driven by the unmodified fireworks-ai 1.2.30 SDK and eval-protocol
0.3.33. It imitates, per the API reference pages (docs.fireworks.ai/api-reference, as read for issue 32):

- ``GET /v1/accounts/<a>/evaluators/<id>``: the evaluator JSON with ``state`` ``BUILDING``, ``ACTIVE`` or
  ``BUILD_FAILED`` (the Get Evaluator page's states) from ``states[id]``, the last state repeating (a list
  scripts a build); an id without a state is 404, as the API answers for a missing resource;
- ``GET /verifyApiKey``: 200 with the ``x-fireworks-account-id`` header eval-protocol reads;
- secrets (``GET``/``POST /v1/accounts/<a>/secrets...``): a GET is 404, a POST is accepted; the body (the
  secret) is read and dropped, never kept, logged or echoed;
- ``POST /v1/accounts/<a>/evaluatorsV2`` (create): the evaluator, then ``BUILDING``;
  ``POST .../evaluators/<id>:getUploadEndpoint``: one signed URL per file, pointing back at this server;
  ``PUT`` to that URL: ``put_status`` (403 by default: the bucket refuses the upload, the failure eval-protocol
  0.3.33 reports only as a warning); ``POST .../evaluators/<id>:validateUpload``: 200.

Everything else is 404. ``calls`` records method and path (never a body). What it cannot know: how the
platform builds an uploaded evaluator, and any field it does not list.
"""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

EVALUATOR = re.compile(r"^/v1/accounts/([^/]+)/evaluators/([^/:?]+)(:[A-Za-z]+)?")


class FireworksApiStub:
    def __init__(self, account: str = "acct-test", put_status: int = 403):
        self.account, self.put_status = account, put_status
        self.states: dict[str, list[str] | str] = {}
        self.reads: dict[str, int] = {}
        self.calls: list[tuple[str, str]] = []
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def _reply(self, status, payload, headers=None):
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

            def _answer(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                path = self.path.split("?", 1)[0]
                stub.calls.append((self.command, path))
                status, payload, headers = stub.answer(self.command, path, body)
                self._reply(status, payload, headers)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _answer

            def log_message(self, *args):
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self.base_url = f"http://127.0.0.1:{self._server.server_address[1]}"

    def state_of(self, ev_id: str) -> str | None:
        script = self.states.get(ev_id)
        if script is None:
            return None
        if isinstance(script, str):
            return script
        n = self.reads.get(ev_id, 0)
        self.reads[ev_id] = n + 1
        return script[min(n, len(script) - 1)]

    def answer(self, method: str, path: str, body: bytes):
        if path.rstrip("/").endswith("/verifyApiKey"):
            return 200, {}, {"x-fireworks-account-id": self.account}
        if "/secrets" in path:  # accept and discard
            return (
                (404, {"error": {"code": 404, "message": "not found"}}, None)
                if method == "GET"
                else (200, {}, None)
            )
        if path.startswith("/upload/") and method == "PUT":
            return self.put_status, {"error": {"message": "signed URL refused by the stub"}}, None
        if path.endswith("/evaluatorsV2") and method == "POST":
            sent = json.loads(body or b"{}")
            ev_id = sent.get("evaluatorId") or sent.get("evaluator_id") or "unnamed"
            self.states[ev_id] = "BUILDING"
            return 200, {"name": f"accounts/{self.account}/evaluators/{ev_id}", "state": "BUILDING"}, None
        m = EVALUATOR.match(path)
        if m and m.group(3) == ":getUploadEndpoint":
            files = json.loads(body or b"{}").get("filenameToSize") or {}
            urls = {name: f"{self.base_url}/upload/{m.group(2)}/{name}" for name in files}
            return 200, {"filenameToSignedUrls": urls}, None
        if m and m.group(3) == ":validateUpload":
            return 200, {}, None
        if m and method == "GET" and not m.group(3):
            state = self.state_of(m.group(2))
            if state is None:
                return 404, {"error": {"code": 404, "message": f"evaluator {m.group(2)} not found"}}, None
            payload = {"name": f"accounts/{m.group(1)}/evaluators/{m.group(2)}", "state": state}
            if state == "BUILD_FAILED":
                payload["status"] = {"code": "INTERNAL", "message": "pip install failed (stub)"}
            return 200, payload, None
        return 404, {"error": {"code": 404, "message": "not imitated by the stub"}}, None

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._server.shutdown()
        self._server.server_close()
