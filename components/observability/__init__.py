"""Autoscaling and observability of the GKE target's serving pools: GKE's label model and its own metric names
(metrics), HPA (autoscaling), the custom-metrics adapter, GKE's dashboard panels and alerts, and the component that
composes them (component) on the target-neutral ``components/monitoring`` package."""
