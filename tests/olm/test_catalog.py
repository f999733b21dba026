"""The catalog OLM installs from (devcluster/catalog.py): both releases' complete bundles,
a channel whose entries carry `replaces` and `skipRange`, bundles named by their images
without inlined manifests, and `opm validate` passing (and failing on a broken channel)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from devcluster import catalog, olm
from manager.paths import REPO_ROOT


def test_a_catalog_of_the_previous_and_the_current_release(
        previous_release: tuple[str, Path], olm_workdir: Path) -> None:
    _, previous_source = previous_release
    releases = [catalog.prepare(source, olm_workdir / "bundles" / name)
                for name, source in (("previous", previous_source), ("current", REPO_ROOT))]
    previous, current = releases
    opm = olm.binaries()[1] / "opm"
    directory = olm_workdir / "catalog"
    catalog.write(releases, directory, opm)  # runs opm validate
    [package_dir] = directory.iterdir()
    documents = [d for d in yaml.safe_load_all((package_dir / "catalog.yaml").read_text()) if d]
    by_schema: dict[str, list[dict[str, Any]]] = {}
    for document in documents:
        by_schema.setdefault(document["schema"], []).append(document)

    [channel] = by_schema["olm.channel"]
    assert channel["entries"] == [
        {"name": previous.name, "skipRange": previous.csv["metadata"]["annotations"][
            "olm.skipRange"]},
        {"name": current.name, "replaces": previous.name,
         "skipRange": current.csv["metadata"]["annotations"]["olm.skipRange"]}]
    [package] = by_schema["olm.package"]
    assert package["defaultChannel"] == channel["name"]
    for bundle, release in zip(by_schema["olm.bundle"], releases, strict=True):
        assert bundle["image"] == release.bundle_image
        types = {p["type"] for p in bundle["properties"]}
        assert "olm.csv.metadata" in types, types
        assert "olm.bundle.object" not in types, types
        # The complete bundle: a manifest for every CRD its CSV owns (the operand's too).
        shipped = {doc["metadata"]["name"] for path in (release.bundle / "manifests").iterdir()
                   for doc in yaml.safe_load_all(path.read_text())
                   if doc and doc["kind"] == "CustomResourceDefinition"}
        owned = {crd["name"] for crd in
                 release.csv["spec"]["customresourcedefinitions"]["owned"]}
        assert owned <= shipped, owned - shipped
    print(f"\n{previous.name} -> {current.name}: {len(documents)} documents, "
          f"{(package_dir / 'catalog.yaml').stat().st_size // 1024} KiB; opm validate passed")

    # The validation has teeth: an entry that replaces a bundle the catalog lacks breaks the
    # upgrade graph.
    broken = olm_workdir / "broken"
    shutil.copytree(directory, broken)
    text = (broken / package_dir.name / "catalog.yaml").read_text()
    (broken / package_dir.name / "catalog.yaml").write_text(
        text.replace(f"replaces: {previous.name}", "replaces: external-secrets-operator.v0.0.9"))
    with pytest.raises(RuntimeError, match="multiple channel heads"):
        catalog.validate(broken, opm)
