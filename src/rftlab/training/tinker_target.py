"""Where a Tinker-API client goes: the one rule every family, study and command follows (docs/platforms.md).

``tinker_target()``:

- ``"url"`` when ``TINKER_BASE_URL`` is set: that server (``rftlab serve tinker`` on this machine or a GPU
  box, or another Tinker-API backend) through the ``tinker`` SDK, with the server's key in
  ``TINKER_API_KEY``;
- ``"hosted"`` when only ``TINKER_API_KEY`` is set: hosted Tinker;
- ``"local"`` otherwise: the in-process ``LocalServiceClient``.

``uses_sdk()`` says whether the target is reached through the SDK (``"url"`` or ``"hosted"``): a study's
``tinker`` backend is the default exactly then. ``sdk_service_client()`` is that SDK client, refusing in one
line when it cannot authenticate (a URL without a key; no key at all).
"""

from __future__ import annotations

import os
from typing import Any, Literal

Target = Literal["url", "hosted", "local"]

__all__ = [
    "Target",
    "TinkerTargetError",
    "check_sdk_credentials",
    "sdk_service_client",
    "tinker_target",
    "uses_sdk",
]


class TinkerTargetError(ValueError):
    """The environment names no Tinker service the SDK can reach (the message says what to set)."""


def tinker_target() -> Target:
    """``"url"`` (``TINKER_BASE_URL``), ``"hosted"`` (``TINKER_API_KEY``) or ``"local"`` (in process)."""
    if os.environ.get("TINKER_BASE_URL"):
        return "url"
    return "hosted" if os.environ.get("TINKER_API_KEY") else "local"


def uses_sdk() -> bool:
    """Whether ``tinker_target()`` is reached through the ``tinker`` SDK (a server or hosted Tinker)."""
    return tinker_target() != "local"


def check_sdk_credentials() -> None:
    """``TinkerTargetError`` (one line, naming what to export) when the SDK could not authenticate: no
    ``TINKER_API_KEY``, with or without ``TINKER_BASE_URL``. Creates no client."""
    if os.environ.get("TINKER_API_KEY"):
        return
    if os.environ.get("TINKER_BASE_URL"):
        raise TinkerTargetError(
            "TINKER_BASE_URL is set but TINKER_API_KEY is not: export the server's key (rftlab serve "
            "tinker accepts the key in its $TINKER_API_KEY, else the one in <storage>/api_key)"
        )
    raise TinkerTargetError(
        "the tinker backend needs TINKER_API_KEY (and TINKER_BASE_URL for a self-hosted Tinker-API server)"
    )


def sdk_service_client() -> Any:
    """``tinker.ServiceClient()`` for the ``"url"`` or ``"hosted"`` target, after ``check_sdk_credentials``."""
    check_sdk_credentials()
    import tinker

    return tinker.ServiceClient()
