"""The external-secrets operator: installs and runs the external-secrets stack."""

__version__ = "0.3.0"
