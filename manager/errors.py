"""The one base class of the problems a pass expects.

A pass that meets a PassError stops and reports it (manager/reporting/failures.py turns each
kind into its conditions and `status.failure`); anything else is a bug, which the worker logs
with its traceback and retries. The kinds: a spec that cannot work (config.ConfigError), a
failed request (client.kube.ApiError, apply.results.ObjectError), an object someone else owns
(apply.ownership.ForeignObjectsError), one being deleted (apply.results.TerminatingObjectError),
a dependency the cluster lacks (steps.preflight.MissingDependencyError)."""


class PassError(Exception):
    """A problem a pass expects and reports; see the module docstring."""
