# The README's two commands: `make run` and `make test`. Everything else is a helper.
.PHONY: run test deps build asan eval bench clean

BUILD_DIR := build/dev
CORUN := $(BUILD_DIR)/corun

run: build
	$(CORUN) run workloads/paper-n5.yaml

test: build asan
	ctest --preset dev
	ctest --preset asan

deps:
	@scripts/install-deps.sh

build: deps
	cmake --preset dev >/dev/null
	cmake --build --preset dev

# Parser-facing layers under AddressSanitizer + UBSan; part of `make test`.
asan: deps
	cmake --preset asan >/dev/null
	cmake --build --preset asan

eval: build
	scripts/eval.sh $(CORUN)

bench: deps
	cmake --preset release >/dev/null
	cmake --build --preset release
	scripts/bench.sh build/release
	scripts/serve-load.sh build/release

clean:
	rm -rf build
