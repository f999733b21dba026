"""OpenShift's ConsoleQuickStart CRD, from the pinned openshift/api module
(manager/versions.py OPENSHIFT_API_VERSION) in the Go module cache: the schema the operator's
QuickStart is checked against, and the CRD the integration test installs. Read in place, not
copied into the repository."""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml

from manager.versions import OPENSHIFT_API_VERSION

MODULE = "github.com/openshift/api"
QUICKSTART_CRD_FILE = "console/v1/zz_generated.crd-manifests/00_consolequickstarts.crd.yaml"


def openshift_api_dir() -> Path:
    """The module's directory (`go mod download`: the module cache, or the proxy once)."""
    go = shutil.which("go")
    if go is None:
        pytest.skip("no Go toolchain to find the openshift/api module")
    with tempfile.TemporaryDirectory() as outside_any_module:
        result = subprocess.run([go, "mod", "download", "-json",
                                 f"{MODULE}@{OPENSHIFT_API_VERSION}"], cwd=outside_any_module,
                                capture_output=True, text=True, check=False, timeout=600)
    if result.returncode != 0:
        pytest.skip(f"{MODULE}@{OPENSHIFT_API_VERSION} is not available: {result.stderr}")
    return Path(json.loads(result.stdout)["Dir"])


def quickstart_crd() -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load(
        (openshift_api_dir() / QUICKSTART_CRD_FILE).read_text())
    return document


def quickstart_schema() -> dict[str, Any]:
    [version] = [v for v in quickstart_crd()["spec"]["versions"] if v["name"] == "v1"]
    schema: dict[str, Any] = version["schema"]["openAPIV3Schema"]
    return schema
