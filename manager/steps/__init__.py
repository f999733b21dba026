"""The steps of one pass (docs/architecture.md): cluster facts, preflight, decide,
readiness, the CA overlap, and Removed's uninstall."""
