"""A field some Tinker-API backends do not return is read with a message naming the gap, not a KeyError."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from rftlab.training.backend_fields import BackendGap, loss_sum


def test_loss_sum_reads_the_reported_sum():
    assert loss_sum(SimpleNamespace(metrics={"loss:sum": 2.5, "other": 1.0})) == 2.5


@pytest.mark.parametrize("metrics", [{}, {"loss:mean": 0.3}, None])
def test_a_backend_without_loss_sum_is_named_as_the_gap(metrics):
    with pytest.raises(BackendGap, match="no 'loss:sum' in forward_backward") as err:
        loss_sum(SimpleNamespace(metrics=metrics))
    if metrics:
        assert "loss:mean" in str(err.value)


def test_a_loss_sum_that_is_not_a_number_is_named():
    with pytest.raises(BackendGap, match="not a number"):
        loss_sum(SimpleNamespace(metrics={"loss:sum": "n/a"}), call="forward")
