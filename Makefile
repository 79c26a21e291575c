# kubedra developer entry points. Everything runs from a local virtual environment (.venv) and
# Kubernetes binaries built from source into .cache/ (see hack/build-binaries.sh).
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
PYTEST_ARGS ?=

.PHONY: venv binaries image install.yaml test test-unit faults fuzz lint test-matrix cluster-up cluster-down demo demo-down clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip==26.3
	$(PY) -m pip install --quiet -e '.[test]'
	touch $(STAMP)

venv: $(STAMP)

## binaries: the control plane's (hack/build-binaries.sh) and a real node's (kubelet,
## containerd, runc, CNI loopback, crictl: hack/build-node-binaries.sh)
binaries:
	hack/build-binaries.sh
	hack/build-node-binaries.sh

## image: kubedra's image from the Dockerfile, without a registry (hack/build-image.sh; root)
image:
	hack/build-image.sh

## install.yaml: the one-file install, rendered from manifests/ (a unit test keeps it equal)
install.yaml: venv
	{ echo "# kubedra install, rendered from manifests/ by \`make install.yaml\` (kubectl kustomize manifests/)."; \
	  echo "# Apply: kubectl apply -f install.yaml  (do not edit: a test keeps it equal)"; \
	  $(VENV)/bin/kubectl kustomize manifests/; } > install.yaml

lint: venv
	$(VENV)/bin/ruff check operator tests e2e bench hack
	$(VENV)/bin/mypy
	PYTHONPATH=operator $(VENV)/bin/lint-imports

## test: everything CI runs: lint, unit, integration and end-to-end tests on a local control plane
test: venv binaries lint
	$(PY) -m pytest $(PYTEST_ARGS)

## faults: the fault-injection suite at the issue's full counts (figures in docs/reliability.md)
faults: venv binaries
	KUBEDRA_FAULTS=full $(PY) -m pytest e2e/test_faults.py -m faults $(PYTEST_ARGS)

## fuzz: the fuzz tests of bad input at larger example counts (figures in docs/reliability.md)
FUZZ_COUNTS := KUBEDRA_FUZZ_CAPTURES=500 KUBEDRA_FUZZ_EXAMPLES=100 KUBEDRA_FUZZ_STATUSES=60 \
	KUBEDRA_FUZZ_CLAIMS=100 KUBEDRA_FUZZ_PLUGIN=100
fuzz: venv binaries
	$(FUZZ_COUNTS) $(PY) -m pytest tests/unit/discovery/test_discovery_fuzz.py \
	  e2e/test_fuzz_inventories.py e2e/test_fuzz_statuses.py e2e/test_fuzz_claims.py \
	  e2e/test_fuzz_plugin.py $(PYTEST_ARGS)

## test-matrix: the user-facing e2e subset (main job, detected features, MIG) on each release
## of KUBE_VERSIONS, each built once (hack/build-kube-version.sh); JUnit results per release
## in .cache/matrix/ (the README's compatibility table). CI keeps running v1.37.2 in full.
KUBE_VERSIONS ?= 1.34.4 1.35.4 1.36.3 1.37.2
MATRIX_TESTS ?= e2e/test_main_job.py e2e/test_served_features.py e2e/test_mig.py
test-matrix: venv binaries
	@mkdir -p .cache/matrix; status=0; for v in $(KUBE_VERSIONS); do \
	  if [[ $$v != 1.37.2 ]]; then nice -n 15 hack/build-kube-version.sh $$v || exit 1; fi; \
	  KUBE_VERSION=$$v $(PY) -m pytest $(MATRIX_TESTS) --junitxml=.cache/matrix/$$v.xml \
	    $(PYTEST_ARGS) || status=1; \
	done; exit $$status

test-unit: venv
	$(PY) -m pytest tests/unit $(PYTEST_ARGS)

## cluster-up: a local control plane with kwok; REAL_NODES=N adds N real nodes (root)
cluster-up: venv binaries
	@$(PY) -m e2e.harness up $(if $(REAL_NODES),--real-nodes $(REAL_NODES))

cluster-down: venv
	@$(PY) -m e2e.harness down

## demo: the main job on a local control plane (KEEP=1 leaves the cluster running)
demo: venv binaries
	$(PY) -m e2e.demo $(if $(KEEP),--keep)

demo-down: venv
	@KUBEDRA_CLUSTER_DIR=.cache/clusters/demo $(PY) -m e2e.harness down

clean:
	rm -rf $(VENV) .cache/clusters
