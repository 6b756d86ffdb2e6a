# inferd — the user interface of the build.
#
#   make          build build/inferd (runs scripts/deps.sh first if needed)
#   make run      build, then serve the bundled models on port 8000
#   make test     check the layering (scripts/check_layers.py), build, then run
#                 the unit tests (ctest) and integration tests (pytest, in
#                 parallel: TEST_WORKERS), printing each phase's wall time
#   make layers   only the source checks: no upward include, no include cycle,
#                 no bare -1 status (the call-cycle check runs in ctest)
#   make test SANITIZE=1   the same with AddressSanitizer + UBSan (build-asan/)
#   make test     also runs every fuzz target for FUZZ_SMOKE_SECONDS (default 3) each
#   make fuzz     run every fuzz target with libFuzzer (FUZZ_SECONDS each, default 300)
#   make models   regenerate the bundled models (models/build/)
#   make install  build, then install inferd into $(PREFIX)/bin, the plugin header
#                 into $(PREFIX)/include/inferd, ONNX Runtime into $(PREFIX)/lib/inferd
#                 and the gRPC .proto files into $(PREFIX)/share/inferd/proto
#                 (PREFIX=/usr/local; DESTDIR=staging root for packagers)
#   make bench    build, then measure inferd against its floors (bench/README.md;
#                 QUICK=1 for a smoke run)
#   make clean    remove build directories

PYTHON ?= /usr/bin/python3
PREFIX ?= /usr/local
DESTDIR ?=
PORT ?= 8000
FUZZ_SECONDS ?= 300
FUZZ_SMOKE_SECONDS ?= 3
JOBS ?= $(shell nproc)

ifeq ($(SANITIZE),1)
BUILD_DIR := build-asan
CMAKE_FLAGS := -DSANITIZE=ON -DCMAKE_BUILD_TYPE=Debug
# The fast unwinder: the slow one made every malloc 5-10 times dearer (server
# start 2.1 s instead of 0.26 s). tests/lsan.supp says what that costs and
# where the rest is checked.
# tests/lsan.supp is for the integration suite only (conftest.py passes it to
# the servers): the unit tests keep their own, narrower suppressions.
export ASAN_OPTIONS := detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS := print_stacktrace=1:halt_on_error=1
else
BUILD_DIR := build
CMAKE_FLAGS := -DCMAKE_BUILD_TYPE=RelWithDebInfo
endif

# Re-run scripts/deps.sh whenever it or the node test clients' lock file
# changes (new packages or pins).
DEPS_STAMP := third_party/.deps-done
INFERD := $(BUILD_DIR)/inferd

.PHONY: all build install run test layers unit integration fuzz fuzz-build fuzz-smoke models clean deps bench soak

all: build

deps:
	scripts/deps.sh

$(DEPS_STAMP): scripts/deps.sh tests/node/package-lock.json
	scripts/deps.sh
	touch $@

$(BUILD_DIR)/Makefile: CMakeLists.txt $(DEPS_STAMP)
	cmake -S . -B $(BUILD_DIR) $(CMAKE_FLAGS) >/dev/null

build: $(BUILD_DIR)/Makefile
	cmake --build $(BUILD_DIR) -j $(JOBS)

# The installed binary finds ONNX Runtime through its rpath
# $ORIGIN/../lib/inferd (CMakeLists.txt), not through third_party/.
install: build
	DESTDIR="$(DESTDIR)" cmake --install $(BUILD_DIR) --prefix "$(PREFIX)"

run: build
	scripts/run.sh $(INFERD) $(PORT)

# Each phase timed (scripts/phase.sh), the table printed at the end and
# kept in $(BUILD_DIR)/test-phases.tsv. The fuzz targets are always built
# with ASan + UBSan (build-fuzz/), so SANITIZE=1 does not run them again.
PHASES := $(BUILD_DIR)/test-phases.tsv
PHASE = scripts/phase.sh $(PHASES)
SUBMAKE = $(MAKE) --no-print-directory

test:
	@rm -f $(PHASES)
	@$(PHASE) deps $(SUBMAKE) $(DEPS_STAMP)
	@$(PHASE) layers $(SUBMAKE) layers
	@$(PHASE) build $(SUBMAKE) build
	@$(PHASE) unit $(SUBMAKE) unit
	@$(PHASE) integration $(SUBMAKE) integration
ifneq ($(SANITIZE),1)
	@$(PHASE) fuzz-build $(SUBMAKE) fuzz-build
	@$(PHASE) fuzz-smoke $(SUBMAKE) fuzz-smoke
endif
	@scripts/phase.sh --table $(PHASES)

# Folders of src/ are layers; the order and the rules live in the script.
# Statuses are spelt one way (src/base/status.h). The call-cycle check
# (scripts/check_calls.py) needs the objects: ctest runs it after the build.
layers:
	$(PYTHON) scripts/check_layers.py
	$(PYTHON) scripts/check_status.py

unit: layers build
	cd $(BUILD_DIR) && ctest --output-on-failure -j $(JOBS)

# pytest-xdist workers: most tests wait on servers, not on a CPU, so twice
# the CPUs keeps both busy (TEST_WORKERS=0: one process). PYTEST_ARGS picks
# tests: PYTEST_ARGS='-k grpc', or a file: PYTEST_ARGS=tests/integration/test_tls.py
# runs only that one (docs/development.md).
TEST_WORKERS ?= $(shell echo $$(( $$(nproc) * 2 )))
PYTEST_ARGS ?= tests/integration
integration: build
	INFERD_BIN=$(CURDIR)/$(INFERD) $(PYTHON) -m pytest -q -n $(TEST_WORKERS) --durations=20 $(PYTEST_ARGS)

fuzz-build: $(DEPS_STAMP)
	cmake -S . -B build-fuzz -DFUZZ=ON -DSANITIZE=ON -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=Debug >/dev/null
	cmake --build build-fuzz -j $(JOBS)

fuzz: fuzz-build
	scripts/fuzz.sh build-fuzz $(FUZZ_SECONDS)

# A few seconds of every fuzz target (part of make test; the corpora are
# also replayed by ctest in the normal build).
fuzz-smoke: fuzz-build
	scripts/fuzz.sh build-fuzz $(FUZZ_SMOKE_SECONDS)

models:
	models/build/make_all.sh

# scripts/deps.sh --bench: onnxruntime-node for experiment 9 (never fails;
# a second run takes no time; without it the experiment is reported skipped).
bench: build
	scripts/deps.sh --bench
	QUICK=$(QUICK) INFERD=$(CURDIR)/$(INFERD) scripts/bench.sh

soak: build
	SOAK_SECS=$(or $(SOAK_SECS),600) INFERD_BIN=$(CURDIR)/$(INFERD) $(PYTHON) scripts/soak.py

clean:
	rm -rf build build-asan build-fuzz
