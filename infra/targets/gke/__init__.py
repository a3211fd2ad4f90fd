"""The ``gke`` serving target: vLLM Deployments on GPU node pools (zonal reservations, Hyperdisk ML / GCS weights,
Workload Identity) behind the GKE Inference Gateway, with HPAs on vLLM metrics and Managed Prometheus.

``config`` (pool, co-hosted group and the ``gke`` / ``gateway`` sections) < ``planning`` < ``rules`` < ``compose``;
``target`` puts them behind the :class:`~infra.targets.base.Target` interface the registry lists.
"""
