"""The batching policies by name: the factory behind ``SessionSpec.policy`` and ``--policy``.

The protocol (:class:`~vidnexus.gpu_executor.batching.BatchPolicy`) lives in
:mod:`vidnexus.gpu_executor.batching`, which every policy module imports; the registry lives here, so
the protocol module imports no policy. Pure, like the policies.

Example:
    >>> from vidnexus.contracts.profile import Profile
    >>> p = Profile.linear(alpha=0.010, beta=0.010, max_batch=8)   # ℓ(b) = 10b + 10 ms
    >>> make_policy("early_drop").decide([0.030, 0.100, 0.100, 0.100], now=0.0, target=3, profile=p)
    BatchDecision(drop=1, take=3)
    >>> sorted(POLICIES)
    ['early_drop', 'early_rescue', 'fifo', 'lazy_drop']
"""

from __future__ import annotations

from vidnexus.gpu_executor.batching import BatchPolicy, PolicyName
from vidnexus.gpu_executor.early_drop import EarlyDrop, EarlyRescue
from vidnexus.gpu_executor.fifo import NoDropFifo
from vidnexus.gpu_executor.lazy_drop import LazyDrop

__all__ = ["POLICIES", "make_policy"]

POLICIES: dict[str, type[BatchPolicy]] = {
    "early_drop": EarlyDrop,
    "early_rescue": EarlyRescue,
    "lazy_drop": LazyDrop,
    "fifo": NoDropFifo,
}
"""Policy name (a :data:`~vidnexus.gpu_executor.batching.PolicyName`) → its class."""


def make_policy(name: PolicyName | str) -> BatchPolicy:
    """A new instance of the policy registered under ``name`` (see :data:`POLICIES`).

    Raises:
        ValueError: ``name`` is not a registered policy; the message lists the choices.
    """
    try:
        return POLICIES[name]()
    except KeyError:
        raise ValueError(f"unknown batching policy {name!r}; choose one of {sorted(POLICIES)}") from None
