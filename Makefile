# mge — one non-recursive Makefile.
#   make            libmge.a, libmge.so and the tools in bin/
#   make check      unit, op, CLI (bats) and oracle tests
#   make check SANITIZE=1   the same under ASan+UBSan (separate build dir)
#   make check SANITIZE=thread   the same under TSan
#   make check-onnx the ONNX backend node tests, per-op report (scripts/deps fetches them)
#   make fuzz       libFuzzer targets (clang), FUZZ_TIME seconds each
#   make demo       the README's main job on the bundled sample
#   make install PREFIX=/usr/local DESTDIR=
.DEFAULT_GOAL := all
MAKEFLAGS += -j$(shell nproc 2>/dev/null || echo 2) --no-print-directory

PREFIX   ?= /usr/local
DESTDIR  ?=
CC       ?= cc
PYTHON   ?= /usr/bin/python3
VERSION  := 0.1.0

OPT      ?= -O2
CFLAGS   ?= $(OPT) -g
WARN     := -Wall -Wextra -Wno-unused-parameter -Wshadow -Wstrict-prototypes
# images: libpng and libjpeg(-turbo), found with pkg-config (formats/image.c)
IMG_PKGS := libpng libjpeg
BASEFLAGS := -std=c11 -D_GNU_SOURCE -fPIC -pthread -Ilib -Ikernels -Iformats -Ibuild/gen \
             -I/usr/include/x86_64-linux-gnu/openblas-pthread $(shell pkg-config --cflags $(IMG_PKGS))
LDLIBS   := -lprotobuf-c -lopenblas -larchive -lz $(shell pkg-config --libs $(IMG_PKGS)) -lm -ldl -pthread

# MPI (mge-train's data-parallel mode): found with mpicc or pkg-config's
# ompi-c; MPI=0 builds without it. Only cmd/train_mpi.c includes mpi.h and
# only mge-train links it; libmge never does.
ifneq ($(MPI),0)
MPI_CFLAGS := $(shell mpicc --showme:compile 2>/dev/null || pkg-config --cflags ompi-c 2>/dev/null)
MPI_LIBS   := $(shell mpicc --showme:link 2>/dev/null || pkg-config --libs ompi-c 2>/dev/null)
endif
MPI_FOUND  := $(if $(strip $(MPI_LIBS)),1,)

ifeq ($(SANITIZE),1)
B        := build/asan
SANFLAGS := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
OPT      := -O1
else ifeq ($(SANITIZE),thread)
# ThreadSanitizer: data races between the pool's threads (OpenBLAS is not
# instrumented, so races inside it go unseen; kernels/cpu/cpu_blas.c says why the
# concurrent single-threaded calls mge makes are safe)
B        := build/tsan
SANFLAGS := -fsanitize=thread -fno-omit-frame-pointer
OPT      := -O1
else
B        := build/rel
SANFLAGS :=
endif
ALLCFLAGS := $(BASEFLAGS) $(WARN) $(CFLAGS) $(SANFLAGS)
ALLLDFLAGS := $(SANFLAGS) $(LDFLAGS)

# ONNX (formats/onnx*.c): Debian's schema (libonnx-dev) compiled by
# protoc-c (protobuf-c-compiler) at build time, never committed
ONNX_PROTO ?= /usr/include/onnx/onnx.proto
GEN_SRC  := build/gen/onnx.pb-c.c
LIB_SRC  := $(sort $(wildcard lib/*.c formats/*.c kernels/ref/*.c kernels/cpu/*.c kernels/sim/*.c)) $(GEN_SRC)
LIB_OBJ  := $(LIB_SRC:%.c=$(B)/%.o)
TOOLS    := mge-run mge-dump mge-opt mge-train mge-quant mge-bench mge-prof
TOOL_SRC := $(filter $(TOOLS:%=cmd/%.c),$(wildcard cmd/*.c))
BINDIR   := $(if $(filter 1 thread,$(SANITIZE)),$(B)/bin,bin)
TOOL_BIN := $(TOOL_SRC:cmd/%.c=$(BINDIR)/%)
# cmd/*.c that are not tools: shared by the tools (cli.c) or helpers of one (train_report.c)
CLI_OBJ  := $(patsubst cmd/%.c,$(B)/cmd/%.o,$(filter-out $(TOOL_SRC) cmd/train_mpi.c,$(wildcard cmd/*.c)))
UNIT_SRC := $(sort $(wildcard tests/unit/test_*.c))
UNIT_BIN := $(UNIT_SRC:tests/unit/%.c=$(B)/tests/%)
DEPS     := $(LIB_OBJ:.o=.d) $(CLI_OBJ:.o=.d) $(B)/cmd/train_mpi.d $(UNIT_BIN:=.d) $(TOOL_SRC:cmd/%.c=$(B)/cmd/%.d)

all: $(B)/libmge.a $(if $(SANITIZE),,$(B)/libmge.so) $(TOOL_BIN)

$(B)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(ALLCFLAGS) -MMD -MP -c $< -o $@

build/gen/onnx.pb-c.c build/gen/onnx.pb-c.h &: $(ONNX_PROTO)
	@mkdir -p build/gen
	protoc-c --c_out=build/gen -I$(dir $(ONNX_PROTO)) $(ONNX_PROTO)
# every ONNX file includes the generated header
$(patsubst %.c,$(B)/%.o,$(wildcard formats/onnx*.c)): | build/gen/onnx.pb-c.h
$(patsubst %.c,build/fuzz/%.o,$(wildcard formats/onnx*.c)): | build/gen/onnx.pb-c.h

# The fast kernels never read errno: without this GCC keeps a sqrtf call
# per element (errno for negative inputs) and cannot vectorize sqrt loops;
# the optimize("no-math-errno") function attribute does not stop it.
$(B)/kernels/cpu/%.o: ALLCFLAGS += -fno-math-errno

# where installed device plugins live (lib/device.c looks there after the
# directory of libmge or the tool)
$(B)/lib/device.o: ALLCFLAGS += -DMGE_LIBDIR='"$(PREFIX)/lib"'
# device plugins built here and installed into $(PREFIX)/lib/mge (the cuda
# backend will be one); the test plugins are not installed
PLUGINS :=

$(B)/libmge.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(B)/libmge.so: $(LIB_OBJ)
	$(CC) -shared -Wl,-soname,libmge.so.0 $(ALLLDFLAGS) -o $@ $^ $(LDLIBS)

$(BINDIR)/%: $(B)/cmd/%.o $(CLI_OBJ) $(B)/libmge.a
	@mkdir -p $(dir $@)
	$(CC) $(ALLLDFLAGS) -o $@ $< $(CLI_OBJ) $(TOOL_EXTRA) $(B)/libmge.a $(LDLIBS) $(TOOL_LIBS)

# mge-train's MPI side (cmd/train_mpi.c: MPI's mge_comm, or stubs that refuse
# a distributed launch); the stamp rebuilds it when MPI appears or goes (MPI=0)
$(BINDIR)/mge-train: $(B)/cmd/train_mpi.o
$(BINDIR)/mge-train: TOOL_EXTRA = $(B)/cmd/train_mpi.o
$(BINDIR)/mge-train: TOOL_LIBS = $(if $(MPI_FOUND),$(MPI_LIBS))
# mge-prof --train under a launcher profiles a data-parallel step the same way
$(BINDIR)/mge-prof: $(B)/cmd/train_mpi.o
$(BINDIR)/mge-prof: TOOL_EXTRA = $(B)/cmd/train_mpi.o
$(BINDIR)/mge-prof: TOOL_LIBS = $(if $(MPI_FOUND),$(MPI_LIBS))
$(B)/cmd/train_mpi.o: ALLCFLAGS += $(if $(MPI_FOUND),-DMGE_HAVE_MPI $(MPI_CFLAGS))
$(B)/cmd/train_mpi.o: $(B)/mpi.stamp
# records whether MPI was found, so a change rebuilds train_mpi.o
$(B)/mpi.stamp: FORCE
	@mkdir -p $(dir $@)
	@echo "$(MPI_FOUND) $(MPI_CFLAGS) $(MPI_LIBS)" | cmp -s - $@ || echo "$(MPI_FOUND) $(MPI_CFLAGS) $(MPI_LIBS)" > $@
.PHONY: FORCE
FORCE:

$(B)/tests/%: tests/unit/%.c tests/unit/unit.h $(B)/libmge.a
	@mkdir -p $(dir $@)
	$(CC) $(ALLCFLAGS) -Itests/unit -MMD -MP -o $@ $< $(B)/libmge.a $(ALLLDFLAGS) $(LDLIBS)

-include $(DEPS)

# ------------------------------------------------------------------ tests
# Device plugins the tests load through MGE_BACKEND_PATH: one without
# kernels, one built for another backend ABI (refused by name).
TEST_PLUGINS := $(B)/plugins/libmge-testnull.so $(B)/plugins/libmge-badabi.so
$(B)/plugins/libmge-testnull.so: tests/plugins/testnull.c kernels/backend.h lib/internal.h lib/mge.h
	@mkdir -p $(dir $@)
	$(CC) $(ALLCFLAGS) -shared -o $@ $< $(ALLLDFLAGS)
$(B)/plugins/libmge-badabi.so: tests/plugins/testnull.c kernels/backend.h lib/internal.h lib/mge.h
	@mkdir -p $(dir $@)
	$(CC) $(ALLCFLAGS) -DBAD_ABI -shared -o $@ $< $(ALLLDFLAGS)

# MGE_OBJDIR: where tests/layers finds the objects whose symbols it checks
check: all $(UNIT_BIN) $(TEST_PLUGINS)
	@MGE_OBJDIR=$(CURDIR)/$(B) MGE_TEST_PLUGINS=$(CURDIR)/$(B)/plugins PYTHON=$(PYTHON) \
	  tests/run-all $(CURDIR)/$(BINDIR) $(UNIT_BIN)

# the layering rule alone: kernels/ objects take from lib/ and formats/
# only the symbols tests/layers lists
layers: $(LIB_OBJ)
	@tests/layers $(B)

unit: $(UNIT_BIN) $(TEST_PLUGINS)
	@fail=0; for t in $(UNIT_BIN); do $$t || fail=1; done; test $$fail = 0

# ------------------------------------------------------------------ fuzzing
FUZZ_TIME ?= 60
FUZZ_SRC  := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_BIN  := $(FUZZ_SRC:tests/fuzz/%.c=build/fuzz/%)
FUZZ_LIB_OBJ := $(LIB_SRC:%.c=build/fuzz/%.o)
build/fuzz/%.o: %.c
	@mkdir -p $(dir $@)
	clang $(BASEFLAGS) -DFUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION -O1 -g -fsanitize=fuzzer-no-link,address,undefined -MMD -MP -c $< -o $@
# header dependencies, so a changed ops.def rebuilds every object that expands it
-include $(FUZZ_LIB_OBJ:.o=.d)
build/fuzz/fuzz_%: tests/fuzz/fuzz_%.c $(FUZZ_LIB_OBJ)
	@mkdir -p $(dir $@)
	clang $(BASEFLAGS) -DFUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION -O1 -g -fsanitize=fuzzer,address,undefined -o $@ $< $(FUZZ_LIB_OBJ) $(LDLIBS)
fuzz-build: $(FUZZ_BIN)
fuzz: $(FUZZ_BIN) fuzz-onnx-seeds
	@for f in $(FUZZ_BIN); do n=$$(basename $$f); mkdir -p build/fuzz/corpus/$$n; \
	  seeds=tests/fuzz/seeds/$${n#fuzz_}; more=build/fuzz/seeds/$${n#fuzz_}; \
	  echo "== $$n ($(FUZZ_TIME)s)"; \
	  $$f -max_total_time=$(FUZZ_TIME) -print_final_stats=1 build/fuzz/corpus/$$n $$( [ -d $$seeds ] && echo $$seeds ) $$( [ -d $$more ] && echo $$more ) 2>&1 | grep -E "stat::number_of_executed_units|ERROR|SUMMARY" || exit 1; done
# fuzz_onnx's extra seeds: the small models of the ONNX node tests (scripts/deps
# caches them), copied at fuzz time, never committed
ONNX_NODE_DATA ?= $(HOME)/.cache/mge/onnx-1.16.2/onnx/backend/test/data/node
fuzz-onnx-seeds:
	@mkdir -p build/fuzz/seeds/onnx
	@if [ -d "$(ONNX_NODE_DATA)" ]; then \
	  find "$(ONNX_NODE_DATA)" -name model.onnx -size -4k | while read -r m; do \
	    cp "$$m" build/fuzz/seeds/onnx/$$(basename $$(dirname "$$m")).onnx; done; \
	else echo "fuzz: no ONNX node tests at $(ONNX_NODE_DATA) (scripts/deps): fuzz_onnx starts from its own seeds only"; fi

# ------------------------------------------------------------------ ONNX node tests
# the whole ONNX backend node suite with the per-op report (make check runs
# only the regression list, tests/onnx/node-pass.txt, in tests/cli/onnx_nodes.bats);
# ONNX_ARGS passes options on: make check-onnx ONNX_ARGS="-v -k test_conv"
check-onnx: all
	@scripts/onnx-node-tests --mge-run $(CURDIR)/$(BINDIR)/mge-run $(ONNX_ARGS); rc=$$?; [ $$rc = 77 ] && rc=0; exit $$rc

# ------------------------------------------------------------------ demo, bench
# demo sets up too: it is the README's first command on a fresh machine
demo:
	@scripts/deps
	@$(MAKE) all
	@scripts/demo

bench: all
	@scripts/bench-latency

bench-train: all
	@MGE_BIN=$(CURDIR)/$(BINDIR) scripts/bench-train

bench-opt: all
	@MGE_BIN=$(CURDIR)/$(BINDIR) scripts/bench-opt

bench-quant: all
	@MGE_BIN=$(CURDIR)/$(BINDIR) scripts/bench-quant

bench-compare: all
	@MGE_BIN=$(CURDIR)/$(BINDIR) scripts/bench-compare --md bench/RESULTS.md

# the tools' time on relu chains of 10^3, 10^4, 10^5 nodes (how cost grows with the graph)
.PHONY: bench-scale
bench-scale: all
	@MGE_BIN=$(CURDIR)/$(BINDIR) scripts/bench-scale

# ------------------------------------------------------------------ install
MAN1 := $(wildcard man/man1/*.1)
MAN3 := $(wildcard man/man3/*.3)
MAN5 := $(wildcard man/man5/*.5)
MAN7 := $(wildcard man/man7/*.7)
COMPLETIONS := $(DESTDIR)$(PREFIX)/share/bash-completion/completions
# What `pkg-config --static --libs mge` adds after -lmge, for a fully static
# program: libmge.a's own needs and, in link order, those of OpenBLAS and
# libarchive. libxml-2.0 is named because libarchive.pc lists -lxml2 but
# not what libxml2.a needs in turn (ICU), and -lstdc++ because ICU is C++
# and icu-uc.pc does not say so. Evaluated by install only.
PC_LIBS_PRIVATE = $(shell pkg-config --static --libs libprotobuf-c openblas libarchive libxml-2.0 zlib libpng libjpeg 2>/dev/null || \
                    echo -lprotobuf-c -lopenblas -larchive -lz -lpng16 -ljpeg) -lstdc++ -lm -ldl -pthread
install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(PREFIX)/include/mge \
	  $(DESTDIR)$(PREFIX)/share/man/man1 $(DESTDIR)$(PREFIX)/share/man/man3 $(DESTDIR)$(PREFIX)/share/man/man5 \
	  $(DESTDIR)$(PREFIX)/share/man/man7 $(COMPLETIONS)
	install -m 755 $(TOOL_BIN) $(DESTDIR)$(PREFIX)/bin/
	install -m 644 $(B)/libmge.a $(DESTDIR)$(PREFIX)/lib/
	install -m 755 $(B)/libmge.so $(DESTDIR)$(PREFIX)/lib/libmge.so.0
	ln -sf libmge.so.0 $(DESTDIR)$(PREFIX)/lib/libmge.so
	install -m 644 lib/mge.h lib/ops.def $(DESTDIR)$(PREFIX)/include/mge/
	install -d $(DESTDIR)$(PREFIX)/lib/mge
	$(if $(PLUGINS),install -m 755 $(PLUGINS) $(DESTDIR)$(PREFIX)/lib/mge/)
	$(if $(MAN1),install -m 644 $(MAN1) $(DESTDIR)$(PREFIX)/share/man/man1/)
	$(if $(MAN3),install -m 644 $(MAN3) $(DESTDIR)$(PREFIX)/share/man/man3/)
	$(if $(MAN5),install -m 644 $(MAN5) $(DESTDIR)$(PREFIX)/share/man/man5/)
	$(if $(MAN7),install -m 644 $(MAN7) $(DESTDIR)$(PREFIX)/share/man/man7/)
	@# man mge_exec_run: one .so link per function a page's NAME line lists
	@for p in $(MAN3); do page=$$(basename $$p); \
	  for f in $$(sed -n '/^\.SH NAME/{n;s/ \\-.*//;s/,//g;p;q}' $$p); do \
	    [ "$$f.3" = "$$page" ] || echo ".so man3/$$page" > $(DESTDIR)$(PREFIX)/share/man/man3/$$f.3; done; done
	@# bash-completion loads completions/TOOL when TOOL is first completed
	for t in $(TOOLS); do install -m 644 completion/mge.bash $(COMPLETIONS)/$$t; done
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|$(VERSION)|' -e 's|@LIBS_PRIVATE@|$(PC_LIBS_PRIVATE)|' \
	  mge.pc.in > $(DESTDIR)$(PREFIX)/lib/pkgconfig/mge.pc
	@# programs linked with -lmge find libmge.so.0 through the loader's cache
	@# (a staged install, DESTDIR, leaves that to the package's scripts)
	@if [ -n "$(DESTDIR)" ]; then :; \
	elif [ -w /etc/ld.so.cache ] && command -v ldconfig > /dev/null; then \
	  ldconfig && echo "install: ran ldconfig: programs find $(PREFIX)/lib/libmge.so.0"; \
	else echo "install: to let programs find $(PREFIX)/lib/libmge.so.0 without LD_LIBRARY_PATH, run" \
	  "ldconfig as root (when /etc/ld.so.conf.d lists $(PREFIX)/lib) or link them with -Wl,-rpath,$(PREFIX)/lib"; fi

clean:
	rm -rf build bin

.PHONY: all check check-onnx unit layers fuzz fuzz-build fuzz-onnx-seeds demo bench bench-train bench-opt bench-quant bench-compare install clean

# keep objects that pattern rules chain through (cmd/*.o), so rebuilds stay incremental
.SECONDARY:
