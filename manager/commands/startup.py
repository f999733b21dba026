"""The operator's own process before it imports the operator (`python -m manager run`).

Starting the operator is mostly importing Python code (docs/performance.md, "What an
operator process imports"). Three costs of that import buy the operator nothing, and
`lean_process()` takes them off before the first import of `run`'s modules:

- The cyclic garbage collector: it runs about 150 times during the imports and frees almost
  nothing (the modules, classes and functions live as long as the process). It is off until
  the imports are done; then `imports_done()` freezes what exists (`gc.freeze()`: never
  scanned again, by any later collection either) and turns it back on.
- pydantic's plugin discovery: building the first model reads the entry points of every
  installed distribution, looking for plugins the operator does not use
  (`PYDANTIC_DISABLE_PLUGINS`, unless the environment sets it).
- aiohttp's two default TLS contexts, built at its import with the system's CA bundle
  (2 MB, and a fifth of the instructions `run` spent importing) for requests that bring
  no context of their own. Every request of the operator brings one, made from the
  credentials (manager/client/credentials.py, and kopf's from the same ConnectionInfo), so
  aiohttp is imported with those two left without CAs. A request that came to rely on them
  would fail its verification, never skip it.

Only the process's own command line gets this (`cli.main()` called without arguments):
tests that call `cli.main(["run", ...])` keep their interpreter as it is.
"""

from __future__ import annotations

import contextlib
import gc
import os
import ssl
import sys
from collections.abc import Iterator
from typing import Any


def lean_process() -> None:
    """Before `run`'s modules load (the process becomes the operator)."""
    gc.disable()
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    if "aiohttp" not in sys.modules:
        with _no_default_trust():
            import aiohttp  # noqa: F401, PLC0415 (its default TLS contexts, built here)


def imports_done() -> None:
    """The operator's modules are loaded: keep them out of every collection from now on,
    and collect again. Nothing to do where `lean_process()` did not run."""
    if not gc.isenabled():
        gc.freeze()
        gc.enable()


@contextlib.contextmanager
def _no_default_trust() -> Iterator[None]:
    """While it lasts, a default TLS context trusts no CA instead of the system's: the
    client context `ssl.create_default_context()` makes, and `set_default_verify_paths()`,
    which loads the system's bundle as well. Contexts given their own CA are unchanged."""
    create, load = ssl.create_default_context, ssl.SSLContext.set_default_verify_paths
    own_load = "set_default_verify_paths" in vars(ssl.SSLContext)

    def without_system_cas(purpose: ssl.Purpose = ssl.Purpose.SERVER_AUTH, *,
                           cafile: Any = None, capath: Any = None,
                           cadata: Any = None) -> ssl.SSLContext:
        if purpose != ssl.Purpose.SERVER_AUTH or cafile or capath or cadata:
            return create(purpose, cafile=cafile, capath=capath, cadata=cadata)
        return ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # verifies peers; trusts no CA

    def no_system_paths(_context: ssl.SSLContext) -> None:
        return None

    ssl.create_default_context = without_system_cas
    ssl.SSLContext.set_default_verify_paths = no_system_paths  # type: ignore[method-assign,assignment]
    try:
        yield
    finally:
        ssl.create_default_context = create
        if own_load:
            ssl.SSLContext.set_default_verify_paths = load  # type: ignore[method-assign]
        else:  # inherited from _ssl._SSLContext, as in every Python so far
            del ssl.SSLContext.set_default_verify_paths
