# kubedra developer entry points. Everything runs from a local virtual environment (.venv) and
# Kubernetes binaries built from source into .cache/ (see hack/build-binaries.sh).
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
PYTEST_ARGS ?=

.PHONY: venv binaries promtool image install.yaml test test-fleet test-matrix test-skew test-unit faults faults-fleet fuzz lint \
	cluster-up cluster-down demo demo-down kind-demo kind-down test-kind clean

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

## promtool: promtool and prometheus, for the alerts' tests and the dashboard's (hack/install-promtool.sh)
promtool:
	hack/install-promtool.sh

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
test: venv binaries promtool lint
	$(PY) -m pytest $(PYTEST_ARGS)

## faults: the fault-injection suite at the issue's full counts (figures in docs/reliability.md)
faults: venv binaries
	KUBEDRA_FAULTS=full $(PY) -m pytest e2e/test_faults.py -m faults $(PYTEST_ARGS)

## faults-fleet: the bounded fault suite with FLEET_NODES simulated nodes of 8 H200 each whose
## pools must converge after every fault too (issue 23; figures in docs/reliability.md), the
## faults of FLEET_FAULTS (KUBEDRA_FAULT_KINDS; the kwok nodes' faults, not the real node's)
FLEET_NODES ?= 1000
FLEET_FAULTS ?= operator SIGKILL,kube-apiserver restart,watch expiry
faults-fleet: venv binaries
	KUBEDRA_FAULT_FLEET_NODES=$(FLEET_NODES) KUBEDRA_FAULT_KINDS="$(FLEET_FAULTS)" \
	  $(PY) -m pytest e2e/test_faults.py -m faults $(PYTEST_ARGS)

## fuzz: the fuzz tests of bad input at larger example counts (figures in docs/reliability.md)
FUZZ_COUNTS := KUBEDRA_FUZZ_CAPTURES=500 KUBEDRA_FUZZ_EXAMPLES=100 KUBEDRA_FUZZ_STATUSES=60 \
	KUBEDRA_FUZZ_CLAIMS=100 KUBEDRA_FUZZ_PLUGIN=100
fuzz: venv binaries
	$(FUZZ_COUNTS) $(PY) -m pytest tests/unit/discovery/test_discovery_fuzz.py \
	  e2e/test_fuzz_inventories.py e2e/test_fuzz_statuses.py e2e/test_fuzz_claims.py \
	  e2e/test_fuzz_plugin.py $(PYTEST_ARGS)

## test-fleet: the fleet-size tests left out of `make test` (the starved-leader test, issue 23)
test-fleet: venv binaries
	KUBEDRA_FLEET_TESTS=1 $(PY) -m pytest e2e/test_leader_starvation.py $(PYTEST_ARGS)

## test-matrix: the user-facing e2e subset (main job, detected features, MIG, activation on
## the real node, the install from the image) on each release of KUBE_VERSIONS (default
## KUBE_VERSION's, else all four), each built
## once (hack/build-kube-version.sh); JUnit results per release in .cache/matrix/, which
## hack/matrix-table.py turns into docs/operating.md's compatibility table. Root (the real
## node). CI keeps running v1.37.2 in full.
KUBE_VERSIONS ?= $(or $(KUBE_VERSION),1.34.4 1.35.4 1.36.3 1.37.2)
MATRIX_TESTS ?= e2e/test_main_job.py e2e/test_feature_detection.py e2e/test_mig.py \
	e2e/test_real_node.py e2e/test_install.py
test-matrix: venv binaries
	@mkdir -p .cache/matrix; status=0; for v in $(KUBE_VERSIONS); do \
	  if [[ $$v != 1.37.2 ]]; then nice -n 15 hack/build-kube-version.sh $$v || exit 1; fi; \
	  KUBE_VERSION=$$v $(PY) -m pytest $(MATRIX_TESTS) --junitxml=.cache/matrix/$$v.xml \
	    $(PYTEST_ARGS) || status=1; \
	done; exit $$status

## test-skew: the agent on a real node whose kubelet is older than the v1.37.2 control plane
## (each of SKEW_KUBELETS, default KUBELET_VERSION's, else one and two minors older, the skew
## Kubernetes supports):
## registration, prepare, health (SKEW_TESTS); JUnit results in
## .cache/matrix/1.37.2-kubelet-<version>.xml, columns of the same table. Root.
SKEW_KUBELETS ?= $(or $(KUBELET_VERSION),1.36.3 1.35.4)
SKEW_TESTS ?= e2e/test_real_node.py::test_pod_with_a_claim_gets_the_h200_and_unprepare_removes_it \
	e2e/test_real_node.py::test_kubelet_restart_keeps_the_pod_and_prepares_nothing_twice \
	e2e/test_node_contracts.py::test_device_health_shows_in_the_running_pods_status_where_the_kubelet_watches_it
test-skew: venv binaries
	@mkdir -p .cache/matrix; status=0; for k in $(SKEW_KUBELETS); do \
	  nice -n 15 hack/build-kube-version.sh $$k || exit 1; \
	  KUBE_VERSION=1.37.2 KUBELET_VERSION=$$k $(PY) -m pytest $(SKEW_TESTS) \
	    --junitxml=.cache/matrix/1.37.2-kubelet-$$k.xml $(PYTEST_ARGS) || status=1; \
	done; exit $$status

test-unit: venv promtool
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

## kind-demo: the demo on a kind cluster (hack/kind/demo.sh; root): Docker in a network
## namespace of its own, a node image built without a registry; the cluster keeps running
kind-demo: venv binaries
	hack/kind/demo.sh

## kind-down: delete the kind cluster and stop the engine; fails if anything is left behind or
## the host's addresses or routes changed
kind-down:
	-@[ -x .cache/bin/kind ] && DOCKER_HOST=unix://$(CURDIR)/.cache/kind/engine/docker.sock \
	  .cache/bin/kind delete cluster --name kubedra
	hack/kind/engine.sh down
	@if [ -f .cache/kind/host-network.before ]; then \
	  { ip -br addr; ip route; ip -6 route; } | diff -u .cache/kind/host-network.before - \
	  && rm .cache/kind/host-network.before && echo "kind-down: the host's addresses and routes are as before"; fi

## test-kind: the e2e checks on the kind cluster of `make kind-demo` (KUBEDRA_KUBECONFIG)
test-kind: venv
	KUBEDRA_KUBECONFIG=$(CURDIR)/.cache/kind/kubeconfig $(PY) -m pytest e2e/test_kind.py -m kind $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) .cache/clusters
