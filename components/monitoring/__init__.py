"""Monitoring of every serving target: vLLM's metric names, the PromQL builders and the label model a target
describes its series with (metrics), the dashboard panels and JSON (dashboard), the alert specs and the alerts every
target raises (alerts), and the component that turns them into a Cloud Monitoring dashboard, notification channels
and alert policies (component). What only one target has stays with it: GKE's in ``components/observability``,
Cloud Run's in ``components/cloud_run/monitoring.py``, Vertex AI's in ``components/vertex/monitoring.py``."""
