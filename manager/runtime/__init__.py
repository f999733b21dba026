"""The live process: kopf's shell, the queue, the watches, leader election and the
reconciler that runs the pass's steps."""
