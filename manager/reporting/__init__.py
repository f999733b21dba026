"""What a pass reports: the conditions and status of both objects, the ESM's entries,
the Events."""
