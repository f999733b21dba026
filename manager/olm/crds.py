"""The CRDs a bundle ships: ours (manifests/crds/) and the operand's (hack/fetch-crds.sh)."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from manager.olm import yamlfile

# The label the seed's "Operational Aspects" command selects the operand's objects by
# (`oc get CustomResourceDefinitions,... -l app=external-secrets`).
OPERAND_LABELS = {"app": "external-secrets"}


class CrdError(RuntimeError):
    """The CRDs could not be found or read."""


@dataclass(frozen=True)
class Crd:
    filename: str
    document: dict[str, Any]
    # The file's text when it is shipped unchanged (ours), else None (re-serialised).
    text: str | None = None

    @property
    def name(self) -> str:
        name: str = self.document["metadata"]["name"]
        return name

    @property
    def kind(self) -> str:
        kind: str = self.document["spec"]["names"]["kind"]
        return kind

    @property
    def group(self) -> str:
        group: str = self.document["spec"]["group"]
        return group

    def version(self, which: str) -> dict[str, Any]:
        """The storage version's entry (`which="storage"`) or the first served one."""
        for entry in self.document["spec"]["versions"]:
            if entry.get(which):
                found: dict[str, Any] = entry
                return found
        raise CrdError(f"CRD {self.name} has no {which} version")

    @property
    def schema(self) -> dict[str, Any]:
        schema: dict[str, Any] = self.version("storage")["schema"]["openAPIV3Schema"]
        return schema


def load_dir(directory: Path) -> list[Crd]:
    files = sorted(directory.glob("*.yaml"))
    if not files:
        raise CrdError(f"no CRDs in {directory}")
    crds = []
    for path in files:
        text = path.read_text()
        document = yamlfile.load(text)
        if not isinstance(document, dict) or document.get("kind") != "CustomResourceDefinition":
            raise CrdError(f"{path} is not a CustomResourceDefinition")
        crds.append(Crd(path.name, document, text))
    return crds


def operand_crd(crd: Crd) -> Crd:
    """An operand CRD as shipped: labelled as part of the operand, re-serialised."""
    document = {**crd.document}
    metadata = {**document["metadata"]}
    metadata["labels"] = {**metadata.get("labels", {}), **OPERAND_LABELS}
    document["metadata"] = metadata
    return Crd(crd.filename, document, None)


def fetch_operand_crds(repo_root: Path) -> Path:
    """Run hack/fetch-crds.sh (cached outside the repo) and return external-secrets/ in it."""
    script = repo_root / "hack" / "fetch-crds.sh"
    result = subprocess.run(["bash", str(script)], stdout=subprocess.PIPE, text=True,
                            check=False, timeout=900)
    if result.returncode != 0:
        raise CrdError(f"{script} failed with exit code {result.returncode}")
    return Path(result.stdout.strip().splitlines()[-1]) / "external-secrets"
