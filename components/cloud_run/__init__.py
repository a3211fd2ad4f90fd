"""The Cloud Run serving target: vLLM on Cloud Run GPU instances, stable and canary as tagged revisions of one
service.

* :mod:`.spec` - the typed inputs the planner builds (standard library only, like ``components/serving/spec.py``);
* :mod:`.stage_weights` - the standard-library stager that copies a verified release into memory (run in-container);
* :mod:`.service` - pure builders of the typed ``gcp.cloudrunv2.Service`` arguments, the deterministic revision
  names, the verifier wrapping and the IAM members;
* :mod:`.monitoring` - Cloud Run's label model and its dashboard and alert specs, on the shared
  ``components/monitoring`` builders;
* :mod:`.component` - the :class:`~components.cloud_run.component.CloudRunServing` component;
* :mod:`.observability` - the :class:`~components.cloud_run.observability.CloudRunObservability` component.

Nothing is imported here: the planner imports :mod:`.spec` and must not pull in Pulumi.
"""
