"""Another local user (an unprivileged uid, issue 37) gets nothing of a ``rftlab serve fireworks`` owner's:
it cannot list the storage folder or read a resource with a key of its own guessing (the ``as_nobody``
fixture: root only)."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from local_fireworks_helpers import ACCOUNT, client, server


def test_an_unprivileged_local_user_gets_nothing_of_the_fireworks_control_plane(tmp_path, as_nobody):
    base = Path(tempfile.mkdtemp(prefix="rftlab-uid-test-"))
    try:
        base.chmod(0o755)
        srv, _log = server(tmp_path, storage=base / "fw")
        try:
            client(srv).datasets.create(dataset_id="owner-data", dataset={"display_name": "x"})
            listing = as_nobody(["ls", str(base / "fw")], base)
            assert listing.returncode != 0 and "Permission denied" in listing.stderr
            url = f"{srv.base_url}/v1/accounts/{ACCOUNT}/datasets/owner-data"
            curl = ["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}"]
            assert (
                as_nobody([*curl, "-H", "Authorization: Bearer fw-guessed-by-nobody", url], base).stdout
                == "401"
            )
            assert as_nobody([*curl, url], base).stdout == "401"
            assert (
                client(srv).datasets.get("owner-data").name.endswith("owner-data")
            )  # the owner's, untouched
        finally:
            srv.stop()
    finally:
        shutil.rmtree(base, ignore_errors=True)
