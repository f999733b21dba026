"""An image registry on loopback: Debian's docker-registry (distribution 2.8), plain HTTP, no
authentication, its blobs in a directory that outlives it (a later registry on the same
directory serves the same digests). It listens in the caller's network namespace, so it is
reachable only from there (hack/netns-run.sh: only `lo`).

hack/publish-images.sh pushes the operator, operand, bundle and catalog images to one;
tests/images starts one per module; tests/olm/test_mirror.py starts two, the second the
mirror that hack/mirror-images.sh copies into.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import IO

import yaml

from devcluster.api import answers_ok

BINARY = "docker-registry"


class RegistryError(RuntimeError):
    """The registry did not start."""


class Registry:
    """`docker-registry serve` on `address` (HOST:PORT) with its storage in `storage`."""

    def __init__(self, storage: Path, address: str, log_path: Path) -> None:
        self.storage = storage
        self.address = address
        self.log_path = log_path
        self._process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    def start(self, timeout: float = 30.0) -> Registry:
        binary = shutil.which(BINARY)
        if binary is None:
            raise RegistryError(f"{BINARY} is not installed (apt-get install docker-registry)")
        self.storage.mkdir(parents=True, exist_ok=True)
        config = self.log_path.with_suffix(".yml")
        config.write_text(yaml.safe_dump({
            "version": 0.1,
            "log": {"level": "warn", "accesslog": {"disabled": True}},
            "storage": {"filesystem": {"rootdirectory": str(self.storage)},
                        "delete": {"enabled": True}},
            "http": {"addr": self.address},
        }))
        self._log = self.log_path.open("ab")
        # Dies with its parent: a killed session leaves no registry behind.
        self._process = subprocess.Popen(
            ["setpriv", "--pdeathsig=KILL", "--", binary, "serve", str(config)],
            stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        while not self.answers():
            if self._process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RegistryError(f"the registry did not start: {self.log_path.read_text()}")
            time.sleep(0.1)
        return self

    def answers(self) -> bool:
        return answers_ok(f"http://{self.address}/v2/")

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(10)
        if self._log is not None:
            self._log.close()
            self._log = None

    def __enter__(self) -> Registry:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main() -> None:
    """`python -m devcluster.registry STORAGE ADDRESS`: serve until SIGTERM or SIGINT."""
    storage, address = Path(sys.argv[1]), sys.argv[2]
    with tempfile.TemporaryDirectory() as scratch:
        registry = Registry(storage, address, Path(scratch) / "registry.log").start()
        print(f"registry: http://{address}/v2/ serving {storage}", flush=True)
        signal.signal(signal.SIGTERM, lambda *_: registry.stop())
        try:
            while registry.running:
                time.sleep(0.5)
        except KeyboardInterrupt:
            pass
        finally:
            registry.stop()


if __name__ == "__main__":
    main()
