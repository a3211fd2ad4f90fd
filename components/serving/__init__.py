"""The vLLM model server: typed inputs (spec), the GKE Deployment and companions (model_server), and the
readiness probe script shipped into the pods (readiness_probe)."""
