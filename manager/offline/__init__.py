"""Tools that read the cluster without changing it: `plan` (the pass as a dry run),
`gather` and its redaction."""
