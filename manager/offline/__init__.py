"""Tools that read the cluster without changing it: `plan` (the pass as a dry run),
`gather` and its redaction; and `convert`, which needs no cluster (Red Hat's GA shape of the
API in this one)."""
