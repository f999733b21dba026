"""Which images the simulated cluster can run, and as what local command.

Images are matched by repository (registry and path, without tag or digest). The operand's
image runs the external-secrets binary built from its Go module at
SIMULATION_EXTERNAL_SECRETS_VERSION (hack/build-tool.sh); the tag of the image in the pod does
not change which binary runs, and tests that care say so. Other entries can be added (the
map is a JSON file the runner reads at start), for example the operator's own image mapped
to a source tree of the operator.
"""

from __future__ import annotations

import json
from pathlib import Path

from devcluster.pods import ImageEntry

OPERAND_REPOSITORY = "ghcr.io/external-secrets/external-secrets"
# The operand image: ENTRYPOINT ["/bin/external-secrets"], USER 65534 (its Dockerfile).
OPERAND_ENTRYPOINT = ("/bin/external-secrets",)
NOBODY = 65534

ImageMap = dict[str, ImageEntry]


def repository(image: str) -> str:
    """`registry/path` of an image reference, without `@digest` and `:tag`."""
    name = image.split("@", 1)[0]
    last = name.rsplit("/", 1)[-1]
    return name[: len(name) - len(last)] + last.split(":", 1)[0]


def default_images(operand_binary: Path) -> ImageMap:
    return {OPERAND_REPOSITORY: ImageEntry(OPERAND_ENTRYPOINT, (str(operand_binary),), NOBODY)}


def save(images: ImageMap, path: Path) -> None:
    path.write_text(json.dumps({name: {"entrypoint": list(e.entrypoint),
                                       "local": list(e.local), "user": e.user}
                                for name, e in images.items()}, indent=1))


def load(path: Path) -> ImageMap:
    return {name: ImageEntry(tuple(e["entrypoint"]), tuple(e["local"]), int(e["user"]))
            for name, e in json.loads(path.read_text()).items()}
