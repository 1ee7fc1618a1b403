"""The run store's error types (one module so that ``atomic`` and ``secrets`` can raise them too)."""

from __future__ import annotations

from collections.abc import Mapping


class RunStoreError(Exception):
    """Base class of run-store errors."""


class FinishedRunError(RunStoreError):
    """A write was attempted on a finished or failed run."""


class CorruptRunError(RunStoreError):
    """One or more run files could not be read; ``problems`` maps each path to what is wrong."""

    def __init__(self, problems: Mapping[str, str]):
        self.problems = dict(problems)
        if len(self.problems) == 1:
            ((path, why),) = self.problems.items()
            message = f"{path}: {why}"
        else:
            lines = "\n".join(f"  {path}: {why}" for path, why in self.problems.items())
            message = f"{len(self.problems)} unreadable run file(s):\n{lines}"
        super().__init__(message)


class SecretLeakError(RunStoreError):
    """A write would have put the value of a credential environment variable on disk; nothing was written."""


class OutputPathError(RunStoreError, ValueError):
    """An output path cannot be written (a folder, a missing folder, no permission, empty name...)."""
