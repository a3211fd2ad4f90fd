"""GKE Inference Gateway: pure object builders (objects), the pinned picker charts (charts), the chart
post-renderer (chart_filter) and the components (component)."""
