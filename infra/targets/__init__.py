"""The serving targets, one package each (``gke``, ``cloud_run``, ``vertex``), behind the interface of ``base.py``;
``common.py`` holds what they share. The registry (``infra/registry.py``) lists them."""
