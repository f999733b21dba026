#!/usr/bin/env bash
# Runs a command in a fresh network namespace whose only interface is `lo`.
# The local control plane and everything that talks to it run this way, so no
# packet can leave the machine (the API server dials webhook Services by itself).
set -euo pipefail
if [ "$#" -eq 0 ]; then echo "usage: $0 COMMAND [ARG...]" >&2; exit 2; fi
if [ "$(tail -n +3 /proc/self/net/dev | cut -d: -f1 | tr -d ' ')" = "lo" ]; then
  exec "$@"   # already isolated
fi
exec unshare --net -- bash -c 'ip link set lo up && exec "$@"' netns-run "$@"
