#!/usr/bin/env bash
# Runs a command in a fresh network namespace whose only interface is `lo`.
# The local control plane and everything that talks to it run this way, so no
# packet can leave the machine (the API server dials webhook Services by itself).
# Inside such a namespace already, the command runs there, unless --fresh asks for a new one
# (hack/run-tests.py: two test runs side by side must not share ports or pod routes).
set -euo pipefail
fresh=false
if [ "${1:-}" = "--fresh" ]; then fresh=true; shift; fi
if [ "$#" -eq 0 ]; then echo "usage: $0 [--fresh] COMMAND [ARG...]" >&2; exit 2; fi
if ! $fresh && [ "$(tail -n +3 /proc/self/net/dev | cut -d: -f1 | tr -d ' ')" = "lo" ]; then
  exec "$@"   # already isolated
fi
exec unshare --net -- bash -c 'ip link set lo up && exec "$@"' netns-run "$@"
