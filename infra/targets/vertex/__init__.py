"""The ``vertex`` serving target: vLLM custom containers as deployed models of a Vertex AI endpoint, stable and canary
in the endpoint's traffic split, co-hosted groups on a shared resource pool.

``config`` (pool, co-hosted group and the ``vertex`` section) < ``planning`` < ``rules`` < ``compose``; ``target``
puts them behind the :class:`~infra.targets.base.Target` interface the registry lists.
"""
