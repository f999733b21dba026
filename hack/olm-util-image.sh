#!/usr/bin/env bash
# Makes the stand-in for OLM's util image (quay.io/operator-framework/olm, whose `cpb` the
# bundle unpack Job copies into the bundle image) and prints its reference,
# localhost/eso-olm-util:<key>: the stand-in base (hack/base-image.sh: /bin/cp) plus the
# pinned cpb built from OLM's module (hack/build-tool.sh olm), hack/olm-util.Dockerfile.
# Built once per change of its inputs (hack/tool-image.sh).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CPB=$(bash "$HERE/build-tool.sh" olm)/cpb
exec "$HERE/tool-image.sh" olm-util "$HERE/olm-util.Dockerfile" "$CPB"
