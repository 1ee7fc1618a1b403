"""JupyterLab's save, made byte-stable for the project's paired notebooks.

A notebook opened in JupyterLab is saved with ``metadata.language_info``: ``{"name": ""}`` before its
kernel has answered, the running Python's version and lexer names after. The committed notebooks carry
no such field (the report build's executed copies get it from their own kernel), so without this hook a
save with no edit rewrites the ``.ipynb`` and breaks the clean-tree rule the Tinker path and the report
stamps rely on. This module is a Jupyter server extension that registers :func:`strip_language_info` as a
pre-save hook of the contents manager; ``make setup`` enables it for the venv's Jupyter
(``etc/jupyter/jupyter_server_config.d/rftlab.json`` under the venv). (A ``pre_save_hook`` given as an
import string in JSON config is not usable: jupyter_server 2.21 imports the trait's old value.) The hook
touches only notebooks paired by jupytext (their ``metadata.jupytext.formats`` is set), i.e. the
project's own.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["SERVER_CONFIG", "strip_language_info"]

#: The Jupyter server configuration ``make setup`` writes (a file of ``jupyter_server_config.d``).
SERVER_CONFIG: dict[str, Any] = {"ServerApp": {"jpserver_extensions": {"rftlab.reports.lab": True}}}


def _jupyter_server_extension_points() -> list[dict[str, str]]:
    return [{"module": "rftlab.reports.lab"}]


def _load_jupyter_server_extension(serverapp: Any) -> None:
    serverapp.contents_manager.register_pre_save_hook(strip_language_info)
    serverapp.log.info("rftlab: paired notebooks are saved without the kernel's language_info")


def strip_language_info(model: Mapping[str, Any] | None = None, path: str = "", **_: Any) -> None:
    """Drop ``metadata.language_info`` from a jupytext-paired notebook's model before it is written (a
    Jupyter ``pre_save_hook``: called with ``model``, ``path`` and ``contents_manager``; changes ``model``
    in place). Any other file or notebook is left as it is."""
    if not isinstance(model, Mapping) or model.get("type") != "notebook":
        return
    content = model.get("content")
    metadata = content.get("metadata") if isinstance(content, Mapping) else None
    if not isinstance(metadata, dict):
        return
    jupytext = metadata.get("jupytext")
    if isinstance(jupytext, Mapping) and jupytext.get("formats"):
        metadata.pop("language_info", None)
