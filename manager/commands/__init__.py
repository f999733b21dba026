"""Subcommands of `python -m manager`."""
