"""The operator's controllers: kopf handlers for the two custom resources, the child and
dependency watches, the coalescing queue and its single worker, the reconcile pass, the CRD
annotator and the status writer. See docs/operations.md."""
