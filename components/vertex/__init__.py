"""Vertex AI serving target: vLLM custom containers from the release's Cloud Storage folder, raw (OpenAI)
requests, a traffic split between pools and optional model co-hosting on a deployment resource pool.

* :mod:`.requests` - pure builders of the aiplatform.v1 REST bodies (standard library only);
* :mod:`.container` - the container's command line: the release verifier, then ``vllm serve`` (standard library);
* :mod:`.provider` - Pulumi dynamic providers for what pulumi-gcp 10.2.0 lacks (model upload + deploy,
  traffic split, a resource pool with service account and reservation affinity);
* :mod:`.endpoint` - the :class:`VertexServing` component;
* :mod:`.monitoring` - AI AutoMetrics' label model, the endpoint's own metrics and the dashboard and alert specs, on
  the shared ``components/monitoring`` builders;
* :mod:`.observability` - the :class:`VertexObservability` component.

Nothing is imported here: the planner imports :mod:`.requests` and must not pull in Pulumi.
"""
