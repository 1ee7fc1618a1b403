"""Another local user (an unprivileged uid on the same machine, issue 37) gets nothing of a
``rftlab serve tinker`` owner's: it cannot list the storage folder, read the generated key, or use the
server with a key of its own guessing (the ``as_nobody`` fixture: root only)."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import tinker
from tinker_helpers import quiet_server

from rftlab.training.local_tinker import TINY_MODEL


def test_an_unprivileged_local_user_gets_nothing_of_the_owner_s(monkeypatch, as_nobody):
    # a parent any user can traverse, so only the server's own 0700 storage folder keeps the other out
    base = Path(tempfile.mkdtemp(prefix="rftlab-uid-test-"))
    try:
        base.chmod(0o755)
        storage = base / "storage"
        monkeypatch.delenv("TINKER_API_KEY", raising=False)
        # no key given: the server generates one into its storage folder
        with quiet_server(storage, api_keys=()) as srv:
            owner_key = (storage / "api_key").read_text().strip()
            sc = tinker.ServiceClient(base_url=srv.base_url, api_key=owner_key)
            tc = sc.create_lora_training_client(base_model=TINY_MODEL, rank=2, seed=0).result()
            tc.save_state("owner-state").result()

            assert as_nobody(["id", "-u"], base).stdout.strip() == "65534"
            listing = as_nobody(["ls", str(storage)], base)
            assert listing.returncode != 0 and "Permission denied" in listing.stderr
            key = as_nobody(["cat", str(storage / "api_key")], base)
            assert key.returncode != 0 and "Permission denied" in key.stderr and owner_key not in key.stdout
            probe = f"{srv.base_url}/api/v1/get_server_capabilities"
            curl = ["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "-H", "X-API-Key: tml-guessed-01"]
            assert as_nobody([*curl, probe], base).stdout == "401"
            assert as_nobody(curl[:-2] + [probe], base).stdout == "401"  # no key at all

            # the owner is untouched by the attempts
            assert tc.save_state("after").result().path.startswith("tinker://")
            sc.close("success").result()
    finally:
        shutil.rmtree(base, ignore_errors=True)
