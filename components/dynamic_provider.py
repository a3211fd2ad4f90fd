"""What every dynamic provider of this program shares: how it is built, pickled and timed.

Pulumi stores a dynamic resource's provider pickled in its state (the ``__provider`` input) and unpickles it for
every later operation. The providers (``components/vertex/provider.py``, ``components/cloud_run/provider.py``) live in
importable modules, so dill pickles their classes by reference, and this base pickles exactly what defines an
instance: the transport factory (None = the real Google API client), the polling policy and the test hooks for
sleeping and reading the clock. Nothing created at run time (a client, a credential) ever reaches the state.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from pulumi.dynamic import ResourceProvider

Factory = TypeVar("Factory")
Policy = TypeVar("Policy")


class PickledProvider(ResourceProvider, Generic[Factory, Policy]):
    """A dynamic provider whose pickled form is its constructor arguments, nothing else."""

    serialize_as_secret_always = False

    def __init__(
        self,
        transport_factory: Factory | None,
        poll: Policy,
        sleep: Callable[[float], None] | None = None,
        clock: Callable[[], float] | None = None,
    ):
        super().__init__()
        self._transport_factory = transport_factory
        self._poll = poll
        self._sleep = sleep
        self._clock = clock

    def __getstate__(self) -> dict[str, Any]:
        # Exactly what defines the provider; nothing cached at runtime can leak into the pickled __provider.
        return {
            "_transport_factory": self._transport_factory,
            "_poll": self._poll,
            "_sleep": self._sleep,
            "_clock": self._clock,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)

    def sleeper(self) -> Callable[[float], None]:
        return self._sleep or time.sleep

    def monotonic(self) -> Callable[[], float]:
        return self._clock or time.monotonic
