"""The simulated Kubernetes cluster for development and tests (never part of the operator).

A real control plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler) built
from the published Go modules, fake nodes from kwok, and a pod runner that runs the
operand's real binaries as local processes. See docs/development.md.
"""
