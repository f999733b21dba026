#!/usr/bin/env bash
# Prints one pinned version from manager/versions.py: hack/version.sh KUBE_VERSION
set -euo pipefail
file="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/manager/versions.py"
value=$(sed -nE "s/^$1: Final = \"([^\"]+)\"$/\1/p" "$file")
[ -n "$value" ] || { echo "no version named $1 in $file" >&2; exit 1; }
echo "$value"
