"""A file-based catalog of this operator's releases, for OLM on the simulated cluster.

Each release is a source tree (this work tree, or a checkout of an earlier release). Its
bundle is `bundle/` as committed plus the operand CRDs that `python -m manager bundle` adds
at build time, both produced by the release's own code. opm renders each bundle, and the
catalog names it by its bundle image (as `make bundle-image` names it), without inlined
manifests: OLM unpacks the image with a Job, as on a real cluster, and the InstallPlans stay
small. The channel lists the releases oldest first, each replacing the one before and
carrying its CSV's `olm.skipRange`. `opm validate` checks the result.

The images the catalog names run here (images.py): the bundle image copies the bundle's
directory where OLM's copy tool puts it (or, for a release given its pushed bundle image,
`Release.pushed_bundle`, that image runs with podman), and each release's operator image runs
`python -m manager` from that release's source tree, or, for a release prepared with the
image's reference in a registry (`prepare(..., operator_image=...)`), that image itself
with podman (containers.py).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from devcluster import images as image_map
from devcluster.pods import ImageEntry

BUNDLE_USER = 0  # a bundle image is FROM scratch: no USER
BUNDLE_FILES = "/opt/bundle"
SKIP_RANGE = "olm.skipRange"
ANNOTATIONS = "operators.operatorframework.io.bundle"

# Run with the release's own package first on sys.path: its generator writes the operand
# CRDs that the committed bundle/ leaves out (`python -m manager bundle` does the same);
# given an image (argv[2]), every bundle file, the CSV naming that image
# (`python -m manager bundle --image`).
_BUILD_TIME_FILES = """
import sys
from pathlib import Path
from manager.olm import bundle, crds
root, out = Path.cwd(), Path(sys.argv[1])
image = sys.argv[2:]
files = bundle.generate(bundle.BundleSources(root, crds.fetch_operand_crds(root), *image))
for path, content in (files.all() if image else files.build_time).items():
    if path.parts[0] == str(bundle.BUNDLE_DIR) and path.parts[1] in ("manifests", "metadata"):
        (out / path.relative_to(bundle.BUNDLE_DIR)).write_text(content)
"""


@dataclass(frozen=True)
class Release:
    source: Path  # the release's source tree
    bundle: Path  # its complete bundle directory
    csv: dict[str, Any]
    annotations: dict[str, str]  # bundle/metadata/annotations.yaml
    environment: Path | None = None
    """The virtualenv its operator image runs with (None: images.release_venv decides)."""
    pulled: bool = False
    """Its operator image is a real image in a registry, pulled and run with podman."""
    pushed_bundle: str | None = None
    """Its bundle image as pushed to a registry (by digest): the catalog names it, and the
    unpack Job pulls and runs it with podman."""

    @property
    def name(self) -> str:
        name: str = self.csv["metadata"]["name"]
        return name

    @property
    def operator_images(self) -> list[str]:
        deployments = self.csv["spec"]["install"]["spec"]["deployments"]
        return [container["image"] for deployment in deployments
                for container in deployment["spec"]["template"]["spec"]["containers"]]

    @property
    def bundle_image(self) -> str:
        """The Makefile's BUNDLE_IMG: the operator image's reference plus `-bundle`; for an
        operator image by digest, its repository plus `-bundle`, tagged with the version; or
        the bundle image pushed to a registry."""
        if self.pushed_bundle:
            return self.pushed_bundle
        operator = self.operator_images[0]
        if "@" in operator:
            return f"{image_map.repository(operator)}-bundle:v{self.csv['spec']['version']}"
        return f"{operator}-bundle"


def prepare(source: Path, directory: Path, environment: Path | None = None, *,
            operator_image: str | None = None) -> Release:
    """The complete bundle of the release in `source`, written to `directory`; its operator
    runs with the virtualenv `environment` (default: images.release_venv's choice). With
    `operator_image` (a reference in a registry), the bundle is generated to name that image
    (`python -m manager bundle --image`), and the image itself runs."""
    committed = subprocess.run(["git", "-C", str(source), "ls-files", "-z", "bundle/manifests",
                                "bundle/metadata"], capture_output=True, check=True).stdout
    for relative in filter(None, committed.decode().split("\0")):
        target = directory / Path(relative).relative_to("bundle")
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source / relative, target)
    image = [operator_image] if operator_image else []
    subprocess.run([sys.executable, "-c", _BUILD_TIME_FILES, str(directory), *image],
                   cwd=source, env={**os.environ, "PYTHONPATH": str(source)}, check=True,
                   timeout=900)
    csv = next(doc for path in sorted((directory / "manifests").glob("*.yaml"))
               for doc in yaml.safe_load_all(path.read_text())
               if doc and doc.get("kind") == "ClusterServiceVersion")
    annotations = yaml.safe_load((directory / "metadata" / "annotations.yaml").read_text())
    return Release(source, directory, csv, annotations["annotations"], environment,
                   pulled=operator_image is not None)


VERSION_LINE = re.compile(r'^__version__ = "[^"]*"$', re.MULTILINE)
OPERAND_IMAGE_VARIABLE = "RELATED_IMAGE_EXTERNAL_SECRETS"


def rebuild(source: Path, directory: Path, version: str, operand_image: str | None = None,
            ) -> Path:
    """A release built from the tree in `source` at another `version`, in `directory`: the
    tree's files as they are (tracked, and untracked ones git does not ignore), the version in
    manager/__init__.py replaced, the bundle regenerated by the tree's own generator, and, with
    `operand_image`, a CSV that names that external-secrets image instead (its
    RELATED_IMAGE_EXTERNAL_SECRETS and relatedImages: what a release that ships a rebuilt
    operand image changes). The copy is a git repository of its own, so `prepare` reads it
    as any release. Returns `directory`."""
    listed = subprocess.run(["git", "-C", str(source), "ls-files", "-z", "--cached", "--others",
                             "--exclude-standard"], capture_output=True, check=True).stdout
    for relative in filter(None, listed.decode().split("\0")):
        origin, target = source / relative, directory / relative
        if not origin.is_symlink() and not origin.is_file():
            continue  # deleted in the work tree
        target.parent.mkdir(parents=True, exist_ok=True)
        if origin.is_symlink():
            target.symlink_to(os.readlink(origin))
        else:
            shutil.copy2(origin, target)
    init = directory / "manager" / "__init__.py"
    text, found = VERSION_LINE.subn(f'__version__ = "{version}"', init.read_text())
    if found != 1:
        raise RuntimeError(f"{init}: no single __version__ line to replace")
    init.write_text(text)
    subprocess.run([sys.executable, "-m", "manager", "bundle"], cwd=directory,
                   env={**os.environ, "PYTHONPATH": str(directory)}, check=True,
                   capture_output=True, timeout=900)
    if operand_image is not None:
        _name_operand_image(directory, operand_image)
    # Compiled as an image's `pip install` compiles the package (git ignores the caches).
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(directory / "manager")],
                   check=True, capture_output=True, timeout=300)
    subprocess.run(["git", "init", "-q", str(directory)], check=True)
    subprocess.run(["git", "-C", str(directory), "add", "-A"], check=True)
    return directory


def _name_operand_image(directory: Path, image: str) -> None:
    path, csv = next((path, doc) for path in sorted((directory / "bundle" / "manifests")
                                                    .glob("*.yaml"))
                     for doc in [yaml.safe_load(path.read_text())]
                     if doc and doc.get("kind") == "ClusterServiceVersion")
    old = None
    for deployment in csv["spec"]["install"]["spec"]["deployments"]:
        for container in deployment["spec"]["template"]["spec"]["containers"]:
            for variable in container.get("env") or []:
                if variable["name"] == OPERAND_IMAGE_VARIABLE:
                    old, variable["value"] = variable["value"], image
    if old is None:
        raise RuntimeError(f"{path}: no {OPERAND_IMAGE_VARIABLE} to replace")
    for related in csv["spec"].get("relatedImages") or []:
        if related["image"] == old:
            related["image"] = image
    path.write_text(yaml.safe_dump(csv, sort_keys=False))


def write(releases: list[Release], directory: Path, opm: Path) -> None:
    """The file-based catalog of `releases` (oldest first) in `directory`, validated."""
    newest = releases[-1].annotations
    package = newest[f"{ANNOTATIONS}.package.v1"]
    channel = newest[f"{ANNOTATIONS}.channel.default.v1"]
    entries = []
    for previous, release in zip([None, *releases], releases, strict=False):
        entry = {"name": release.name}
        if previous is not None:
            entry["replaces"] = previous.name
        skip_range = release.csv["metadata"].get("annotations", {}).get(SKIP_RANGE)
        if skip_range:
            entry["skipRange"] = skip_range
        entries.append(entry)
    documents: list[dict[str, Any]] = [
        {"schema": "olm.package", "name": package, "defaultChannel": channel},
        {"schema": "olm.channel", "package": package, "name": channel, "entries": entries}]
    for release in releases:
        bundle = json.loads(_opm(opm, "render", str(release.bundle), "-o", "json"))
        bundle["image"] = release.bundle_image
        documents.append(bundle)
    # opm moves the inlined manifests into the CSV's metadata only for bundles with an image.
    staging = directory.with_name(f"{directory.name}.rendered") / package
    staging.mkdir(parents=True)
    (staging / "catalog.json").write_text("\n".join(json.dumps(d) for d in documents))
    rendered = _opm(opm, "render", str(staging.parent),
                    "--migrate-level=bundle-object-to-csv-metadata", "-o", "yaml")
    shutil.rmtree(staging.parent)
    (directory / package).mkdir(parents=True)
    (directory / package / "catalog.yaml").write_text(rendered)
    validate(directory, opm)


def validate(directory: Path, opm: Path) -> None:
    """`opm validate`: raises with opm's reasons when the catalog is not valid."""
    _opm(opm, "validate", str(directory))


def images(releases: list[Release]) -> image_map.ImageMap:
    """Each release's bundle image and operator image, as the runner runs them."""
    found: image_map.ImageMap = {}
    for release in releases:
        # OLM's unpack Job runs `/util/cpb /bundle`: cpb copies the image's /manifests and
        # /metadata into /bundle (the image itself, or here a copy of the directory).
        found[release.bundle_image] = (
            image_map.pulled(BUNDLE_USER) if release.pushed_bundle else ImageEntry(
                ("/util/cpb",),
                ("cp", "-R", f"{BUNDLE_FILES}/manifests", f"{BUNDLE_FILES}/metadata"),
                BUNDLE_USER, files=((str(release.bundle), BUNDLE_FILES),)))
        for image in release.operator_images:
            found[image] = (image_map.pulled() if release.pulled else
                            image_map.operator_image(release.source, release.environment))
    return found


def _opm(opm: Path, *args: str) -> str:
    result = subprocess.run([str(opm), *args], capture_output=True, text=True, check=False,
                            timeout=300)
    if result.returncode != 0:
        raise RuntimeError(f"opm {' '.join(args)} failed: {result.stderr.strip()[-2000:]}")
    return result.stdout
