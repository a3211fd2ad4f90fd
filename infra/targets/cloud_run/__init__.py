"""The ``cloud_run`` serving target: vLLM on Cloud Run GPU instances (scale to zero, no cluster), stable and canary as
tagged revisions of one service, the release mounted as a Cloud Storage volume.

``config`` (pool and the ``cloud_run`` section) < ``planning`` < ``rules`` < ``compose``; ``target`` puts them behind
the :class:`~infra.targets.base.Target` interface the registry lists.
"""
