"""Autoscaling and observability of the serving pools: metric names and PromQL (metrics), HPA (autoscaling),
the custom-metrics adapter, dashboard, alerts, and the component that composes them (component)."""
