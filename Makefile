# Developer verbs. Everything that talks to the local control plane runs inside a
# loopback-only network namespace (hack/netns-run.sh): see docs/development.md.
# Steps that need the Go module proxy (building the control plane and the bundle validator,
# fetching the operand and cert-manager CRDs) run before entering that namespace; their
# results are cached outside the repository.
SHELL := /bin/bash
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
NETNS_RUN := hack/netns-run.sh
# The simulated cluster (devcluster/) is development tooling, not part of the package.
DEVCLUSTER := env PYTHONPATH=$(CURDIR) $(PY) -m devcluster
PYTEST_ARGS ?=
ESC ?= samples/esc-default.yaml
IMG ?= quay.io/external-secrets-operator/external-secrets-operator:v$(shell sed -nE 's/^__version__ = "(.*)"/\1/p' manager/__init__.py)
BUNDLE_IMG ?= $(IMG)-bundle
CONTAINER_TOOL ?= $(shell command -v podman || command -v docker)

.PHONY: help venv prereqs prereqs-cluster prereqs-suites prereqs-olm test test-unit run demo render cluster-up cluster-down lint \
	generate verify bundle bundle-validate refresh-core-schemas update-golden bench \
	image bundle-image e2e-kind clean

help:
	@echo "make test          install, build or reuse the control plane, run every test"
	@echo "make run           run the operator (against \$$KUBECONFIG, or a simulated cluster)"
	@echo "make demo          show the operator installing the stack on a simulated cluster"
	@echo "make render        print the objects for ESC=$(ESC) without a cluster"
	@echo "make cluster-up    start the simulated cluster (hack/local-cluster.sh up)"
	@echo "make cluster-down  stop it"
	@echo "make test-olm      only the OLM install, upgrade and uninstall tests (tests/olm)"
	@echo "make test-disruption  drains, SIGKILLs and rollouts with the samplers (tests/disruption)"
	@echo "make lint          ruff and mypy"
	@echo "make generate      regenerate CRDs, docs/api.md, operator manifests and bundle/"
	@echo "make verify        fail if generated files are stale"
	@echo "make bundle        regenerate bundle/ and validate it with the operator-framework"
	@echo "make bench         measure speed and footprint (bench/results, docs/performance.md)"
	@echo "make bench-disruption  the disruption figures (bench/results/disruption.json, docs/resilience.md)"
	@echo "make image         build the operator image (podman or docker; BASE_IMAGE=local or a base)"
	@echo "make previous-image  build the previous release's operator image (hack/upgrade-test.sh image)"
	@echo "make test-images   build the operator image and run it as the Deployment does (podman)"
	@echo "make operand-images  build the external-secrets and bitwarden-sdk-server images"
	@echo "make push-images   operator, operand, bundle and catalog images, by digest, to a loopback"
	@echo "                   registry (and OLM's util and opm images); make catalog-image is the same"
	@echo "make e2e-kind      end-to-end tests on a kind cluster (needs Docker)"

$(VENV)/.installed: pyproject.toml
	@command -v $(PYTHON) >/dev/null || { echo "$(PYTHON) is required"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	touch $@

venv: $(VENV)/.installed

# Built or fetched once per machine and version, cached in ~/.cache/eso-operator.
# What the simulated cluster runs (make run, make demo): the control plane, kwok, the operand
# and bitwarden-sdk-server (built from their release trees: hack/upstream-sources.txt).
prereqs-cluster:
	bash hack/build-control-plane.sh >/dev/null
	bash hack/build-tool.sh kwok >/dev/null
	bash hack/build-tool.sh external-secrets >/dev/null
	bash hack/build-tool.sh bitwarden-sdk-server >/dev/null
	hack/fetch-crds.sh >/dev/null

# What the cluster suites use besides: cert-manager, promtool, the bundle validator, the
# previous release's environment.
prereqs-suites: prereqs-cluster
	bash hack/build-tool.sh cert-manager >/dev/null
	bash hack/build-tool.sh promtool >/dev/null
	hack/validate-bundle.sh --build >/dev/null
	bash hack/upgrade-test.sh venv >/dev/null

# What only the OLM suites use: OLM, opm and grpc_health_probe (the catalog image's).
prereqs-olm:
	bash hack/build-tool.sh olm >/dev/null
	bash hack/build-tool.sh opm >/dev/null
	bash hack/build-tool.sh grpc-health-probe >/dev/null

prereqs: prereqs-suites prereqs-olm

# The operator image for tests/images, and the previous release's for
# tests/olm/test_upgrade_image.py, built (outside the network namespace: the wheels and the
# base need the package indexes) wherever podman is installed; elsewhere those tests skip.
.PHONY: test-images-built
test-images-built:
	@if command -v podman >/dev/null; then $(MAKE) --no-print-directory image previous-image \
	  operand-images CONTAINER_TOOL=podman; \
	  else echo "podman is not installed: tests/images will skip"; fi

# hack/run-tests.py: three lanes (unit and the cluster suites; the OLM and image suites, then
# a share of the integration files; the suites with operators of their own), then the tests
# marked timing, alone. The OLM lane first builds OLM's tools and the images, outside its
# network namespace, while the others already run.
test: venv prereqs-suites
	PYTEST_ARGS="$(PYTEST_ARGS)" $(PY) hack/run-tests.py

# The image smoke test alone (tests/images): `make image`, then the image run as the
# Deployment runs it, against the simulated cluster.
.PHONY: test-images
test-images: venv prereqs
	$(MAKE) --no-print-directory image CONTAINER_TOOL=podman
	$(NETNS_RUN) $(VENV)/bin/pytest tests/images $(PYTEST_ARGS)

test-unit: venv
	$(VENV)/bin/pytest tests/unit $(PYTEST_ARGS)

run: venv
	@if [ -n "$$KUBECONFIG" ]; then \
	  $(PY) -m manager run; \
	else \
	  $(MAKE) --no-print-directory prereqs-cluster && \
	  $(NETNS_RUN) $(DEVCLUSTER) run -- $(PY) -m manager run; \
	fi

demo: venv prereqs-cluster
	$(NETNS_RUN) env PYTHONPATH=$(CURDIR) $(PY) hack/demo.py

render: venv
	$(PY) -m manager render -f $(ESC)

cluster-up: venv
	hack/local-cluster.sh up

cluster-down: venv
	hack/local-cluster.sh down

lint: venv
	$(VENV)/bin/ruff check manager devcluster tests hack bench
	$(VENV)/bin/mypy

generate: venv
	$(PY) -m manager generate
	$(PY) -m manager bundle

verify: venv
	$(PY) -m manager generate --check
	$(PY) -m manager bundle --check

bundle: venv
	$(PY) -m manager bundle
	hack/validate-bundle.sh -strict

refresh-core-schemas: venv prereqs
	$(NETNS_RUN) $(DEVCLUSTER) run -- $(PY) -m manager generate --refresh-core-schemas

# Rewrites the golden files (every case then fails on purpose), then checks them as CI does.
update-golden: venv
	-UPDATE_GOLDEN=1 $(VENV)/bin/pytest tests/unit/render/test_render_golden.py -q --no-header -p no:warnings >/dev/null
	$(VENV)/bin/pytest tests/unit/render/test_render_golden.py -q

bench: venv prereqs
	$(NETNS_RUN) env PYTHONPATH=$(CURDIR) $(PY) bench/run.py

# BASE_IMAGE=local: a base made from Debian packages (no registry needed); any other value
# is the base image to build on, e.g. the Dockerfile's default (UBI 9, Python 3.11).
BASE_IMAGE ?= local
image:
	@[ -n "$(CONTAINER_TOOL)" ] || { echo "make image needs podman or docker"; exit 1; }
	IMG=$(IMG) BASE_IMAGE=$(BASE_IMAGE) CONTAINER_TOOL=$(CONTAINER_TOOL) hack/build-image.sh

# The operand's images, external-secrets and bitwarden-sdk-server, from the binaries of the
# pinned releases (hack/operand-image.sh: built once per change of their inputs; prints each
# reference). hack/publish-images.sh pushes them and the bundle names them by digest.
.PHONY: operand-images
operand-images:
	@[ -n "$(CONTAINER_TOOL)" ] || { echo "make operand-images needs podman or docker"; exit 1; }
	bash hack/build-tool.sh external-secrets >/dev/null
	bash hack/build-tool.sh bitwarden-sdk-server >/dev/null
	CONTAINER_TOOL=$(CONTAINER_TOOL) hack/operand-image.sh external-secrets
	CONTAINER_TOOL=$(CONTAINER_TOOL) hack/operand-image.sh bitwarden-sdk-server

# The previous release's operator image (hack/upgrade-test.sh image: this tree's recipe on its
# source, built once per commit and recipe), for tests/olm/test_upgrade_image.py.
.PHONY: previous-image
previous-image:
	@[ -n "$(CONTAINER_TOOL)" ] || { echo "make previous-image needs podman or docker"; exit 1; }
	CONTAINER_TOOL=$(CONTAINER_TOOL) hack/upgrade-test.sh image

# The operator and operand images, the bundle and catalog images, and OLM's util and opm images,
# pushed by digest to a registry on loopback, in a network namespace of their own
# (hack/publish-images.sh; the registry's storage stays in ~/.cache/eso-operator/registry);
# prints the seven references. hack/mirror-images.sh copies a catalog and what it installs to
# another registry (docs/olm.md, "Mirroring for a disconnected cluster").
.PHONY: push-images catalog-image
push-images: image operand-images
	$(NETNS_RUN) env IMG=$(IMG) hack/publish-images.sh

# The catalog image names the bundle image by digest, which names the operator image by
# digest: they are built and pushed as one chain, push-images.
catalog-image: push-images

bundle-image: bundle
	@[ -n "$(CONTAINER_TOOL)" ] || { echo "make bundle-image needs podman or docker"; exit 1; }
	$(CONTAINER_TOOL) build -f bundle/bundle.Dockerfile -t $(BUNDLE_IMG) bundle

e2e-kind: venv
	hack/kind-e2e.sh

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache

# End-to-end, upgrade and uninstall helpers (tests/e2e, tests/upgrade, hack/upgrade-test.sh).
.PHONY: e2e upgrade-test upgrade-kind
e2e: venv prereqs
	$(NETNS_RUN) $(VENV)/bin/pytest tests/e2e $(PYTEST_ARGS)

upgrade-test: venv prereqs
	hack/upgrade-test.sh local $(PYTEST_ARGS)

upgrade-kind: venv
	hack/upgrade-test.sh kind $(PYTEST_ARGS)

# Resilience suites (tests/resilience, docs/resilience.md): faults, hostile input, privilege.
.PHONY: test-resilience
test-resilience: venv prereqs
	$(NETNS_RUN) $(VENV)/bin/pytest tests/resilience $(PYTEST_ARGS)

# The disruption suite (tests/disruption, docs/resilience.md): drains, evictions, SIGKILLs and
# rollouts with the admission and sync samplers running; part of `make test`.
.PHONY: test-disruption
test-disruption: venv prereqs
	$(NETNS_RUN) $(VENV)/bin/pytest tests/disruption $(PYTEST_ARGS)

# The disruption figures (docs/resilience.md, bench/results/disruption.json): the disruption
# suite and the OLM upgrades with the samplers, once; the results file, then the table from it.
DISRUPTION_RESULTS := bench/results/disruption.json
.PHONY: bench-disruption
bench-disruption: venv prereqs
	$(NETNS_RUN) env DISRUPTION_RESULTS=$(CURDIR)/$(DISRUPTION_RESULTS) $(VENV)/bin/pytest -s \
	  tests/disruption tests/olm/test_upgrade.py $(PYTEST_ARGS)
	$(PY) -m tests.disruption.figures $(DISRUPTION_RESULTS)

# OLM installs, upgrades and removes the operator (tests/olm, docs/olm.md); part of `make test`.
# The operator images first: test_install_image.py installs the current one from a loopback
# registry, test_upgrade_image.py the previous release's, then upgrades to the current one.
.PHONY: test-olm
test-olm: venv prereqs test-images-built
	$(NETNS_RUN) $(VENV)/bin/pytest tests/olm $(PYTEST_ARGS)
