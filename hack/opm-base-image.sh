#!/usr/bin/env bash
# Makes the opm base image that catalog images are built FROM (hack/catalog.Dockerfile) and
# prints its reference, localhost/eso-opm-base:<key>: the stand-in base (hack/base-image.sh)
# plus the pinned opm and grpc_health_probe (hack/opm-base.Dockerfile). It stands in for
# upstream's quay.io/operator-framework/opm image, which no registry here serves; OLM's
# unpack Job runs it as its opm image too (`opm alpha bundle extract`).
#
# Built once per change of its inputs (hack/tool-image.sh: the key hashes them all). Needs
# no network once the base and the binaries are cached (make image, make prereqs).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
OPM=$(bash "$HERE/build-tool.sh" opm)/opm
PROBE=$(bash "$HERE/build-tool.sh" grpc-health-probe)/grpc_health_probe
exec "$HERE/tool-image.sh" opm-base "$HERE/opm-base.Dockerfile" "$OPM" "$PROBE"
