"""Errors the local tinker backend refuses a request with. Each is a ``ValueError``, so the HTTP service
files it as the user's (``category: user``, the SDK's ``RequestFailedError``), never as a server error."""

from __future__ import annotations


class NonFiniteError(ValueError):
    """A computation met a NaN or an infinity (a gradient, a loss, the model's logits): the request is
    refused and nothing is applied; the message names the quantity."""


class ParameterError(ValueError):
    """A request parameter outside its documented range; the message names the field and the range."""
