"""Vertex AI serving target: vLLM custom containers from the release's Cloud Storage folder, raw (OpenAI)
requests, a traffic split between pools and model co-hosting in one deployed model running the co-host server.

* :mod:`.requests` - pure builders of the aiplatform.v1 REST bodies (standard library only);
* :mod:`.container` - the container's command line: the release verifier, then ``vllm serve``; or, for a co-hosted
  group, the bootstrap (:mod:`.bootstrap`) that writes and runs the co-host server (standard library);
* :mod:`.provider` - Pulumi dynamic providers for what pulumi-gcp 10.2.0 lacks (model upload + deploy,
  traffic split);
* :mod:`.endpoint` - the :class:`VertexServing` component;
* :mod:`.monitoring` - AI AutoMetrics' label model, the endpoint's own metrics and the dashboard and alert specs, on
  the shared ``components/monitoring`` builders;
* :mod:`.observability` - the :class:`VertexObservability` component.

Nothing is imported here: the planner imports :mod:`.requests` and must not pull in Pulumi.
"""
