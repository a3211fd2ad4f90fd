"""The vLLM model server: typed inputs (spec), the GKE Deployment and companions (model_server), the startup /
readiness / liveness probe script shipped into the pods (probe) and the release verifier (verify_release)."""
