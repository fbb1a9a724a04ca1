"""Prometheus metrics of spurctld and spurd (prometheus_client; never imported by the CLI)."""
