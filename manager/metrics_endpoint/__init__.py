"""The operator's GET /metrics: the server, its TLS and who may scrape it (the series
themselves are manager/metrics.py)."""
