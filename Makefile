# The README's two commands: `make run` and `make test`. Everything else is a helper.
.PHONY: run test deps build asan tsan tsan-build fuzz fuzz-build eval bench image clean

BUILD_DIR := build/dev
CORUN := $(BUILD_DIR)/corun

# The main job on the paper-like N = 5 workload with a timeline of arrivals, departures and
# demand changes; the report lands in out/run/random-churn/report.html.
# It builds the corun binary (and the worker it starts) only: the test programs wait for `make
# test`.
run: deps
	cmake --preset dev >/dev/null
	cmake --build --preset dev --target corun corun-torch-worker
	$(CORUN) run workloads/scenarios/random-churn.yaml

test: build asan tsan-build fuzz-build
	ctest --preset dev
	ctest --preset asan
	ctest --preset tsan
	scripts/fuzz.sh 20

deps:
	@scripts/install-deps.sh

build: deps
	cmake --preset dev >/dev/null
	cmake --build --preset dev

# Parser-facing layers under AddressSanitizer + UBSan; part of `make test`.
asan: deps
	cmake --preset asan >/dev/null
	cmake --build --preset asan

# The threaded layers (plan, runtime, serve) under ThreadSanitizer, built with clang so that the
# lock annotations (core/mutex.h) are checked too; part of `make test`. Suppressions, each with
# its reason: scripts/tsan.supp.
tsan-build: deps
	cmake --preset tsan >/dev/null
	cmake --build --preset tsan

tsan: tsan-build
	ctest --preset tsan

# libFuzzer targets (clang, ASan + UBSan) for the workload parser, serve's request bodies, the
# surrogate loader and the dataset reader;
# `make test` runs each for 20 s, `make fuzz` for FUZZ_SECONDS (e.g. make fuzz FUZZ_SECONDS=3600).
FUZZ_SECONDS ?= 300
fuzz-build: deps
	cmake --preset fuzz >/dev/null
	cmake --build --preset fuzz

fuzz: fuzz-build
	scripts/fuzz.sh $(FUZZ_SECONDS)

eval: build
	scripts/eval.sh $(CORUN)

bench: deps
	cmake --preset release >/dev/null
	cmake --build --preset release
	scripts/bench.sh build/release
	scripts/serve-load.sh build/release

# An OCI image from Debian packages alone (debootstrap + umoci; root), tested in a chroot:
# out/image/corun.oci.tar. deploy/Dockerfile is the same image for docker.
image:
	scripts/image.sh

clean:
	rm -rf build
