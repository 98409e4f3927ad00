# tools/tools.mk: the instrumented scheduler (corosched), the demo and the programs the
# integration tests trace. Included by the top Makefile, which provides OUT, Q, msg, CC and
# CLANG and the phony target `tools`.
#
#   build/demo                          the demo server (corosched linked in)
#   build/tests/scenarios               test scenarios, probes in the executable
#   build/tests/scenarios-so            the same, probes in build/tests/libcorosched.so
#   build/tests/usdt_matrix_*           every probe with known arguments, per compiler and -O
#   build/tests/go/*                    Go programs (where go is installed: golang-go)
#
# TOOLS_SAN adds flags to corosched, the demo and the scenarios, e.g. `make tools TOOLS_SAN=-fsanitize=address`
# (use a fresh OUT=... for that, objects are not rebuilt when only flags change).

CXX ?= g++
TOOLS_SAN ?=
# -Wno-unused-parameter as in the top CFLAGS: coroutine entry points all take an `arg`.
TOOLS_CFLAGS := -O2 -g -std=gnu11 -Wall -Wextra -Wno-unused-parameter -D_GNU_SOURCE \
		-Iusdt -Itools/sched -pthread $(TOOLS_SAN)
TOOLS_LDFLAGS := -pthread $(TOOLS_SAN)

SCHED_DEPS := tools/sched/corosched.h usdt/corobpf.h
SCHED_OBJS := $(OUT)/tools/sched/corosched.o $(OUT)/tools/sched/switch_x86_64.o
SCHED_PIC_OBJS := $(OUT)/tools/sched/pic/corosched.o $(OUT)/tools/sched/pic/switch_x86_64.o

MATRIX_SRC := tests/integration/progs/usdt_matrix.c
MATRIX_BINS := $(addprefix $(OUT)/tests/usdt_matrix_,c_O0 c_O2 cxx_O0 cxx_O2 clang_O2 clang_lld so \
	c_O2_nop5)
MATRIX_FLAGS := -g -Wall -Wextra -D_GNU_SOURCE -Iusdt

tools: $(OUT)/demo $(OUT)/tests/scenarios $(OUT)/tests/scenarios-so \
       $(OUT)/tests/libcorosched.so $(MATRIX_BINS) $(OUT)/tests/libusdt_matrix.so \
       $(OUT)/tests/early $(OUT)/tests/libdlprobe.so $(OUT)/tests/strings $(OUT)/tests/bugs \
       $(OUT)/tests/uctx $(OUT)/tests/fibers $(OUT)/tests/fibers-addr $(OUT)/tests/pth \
       $(OUT)/tests/static_plain $(OUT)/tests/faults $(OUT)/tests/faults-nop5 \
       $(OUT)/tests/redzone \
       $(OUT)/tests/stacks-fp $(OUT)/tests/stacks-nofp $(OUT)/tests/stacks-nopie \
       $(OUT)/tests/stacks-lld $(OUT)/tests/hostile $(OUT)/tests/hostile_many \
       $(OUT)/tests/attach_target-static $(OUT)/tests/attach_target-specs400 \
       $(OUT)/tests/attach_target-specs600 $(OUT)/tests/spans $(OUT)/tests/gate_flood \
       $(OUT)/tests/announce $(OUT)/tests/announce_mute $(OUT)/tests/announce_eager

# Only the API is exported from libcorosched.so; the probe semaphores stay hidden (corobpf.h).
$(OUT)/tools/sched/corosched.o $(OUT)/tools/sched/pic/corosched.o: tools/sched/corosched.c \
		$(SCHED_DEPS)
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(TOOLS_CFLAGS) -fvisibility=hidden $(if $(findstring /pic/,$@),-fPIC) \
		-c $< -o $@

$(OUT)/tools/sched/switch_x86_64.o $(OUT)/tools/sched/pic/switch_x86_64.o: \
		tools/sched/switch_x86_64.S
	$(call msg,AS,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) -c $< -o $@

$(OUT)/tests/libcorosched.so: $(SCHED_PIC_OBJS)
	$(call msg,LINK,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) -shared -Wl,-soname,libcorosched.so $(TOOLS_LDFLAGS) $^ -o $@

$(OUT)/tools/demo/demo.o: tools/demo/demo.c $(SCHED_DEPS)
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(TOOLS_CFLAGS) -c $< -o $@

$(OUT)/demo: $(OUT)/tools/demo/demo.o $(SCHED_OBJS)
	$(call msg,LINK,$@)
	$(Q)$(CC) $(TOOLS_LDFLAGS) $^ -o $@

$(OUT)/tools/progs/scenarios.o: tests/integration/progs/scenarios.c $(SCHED_DEPS)
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(TOOLS_CFLAGS) -c $< -o $@

$(OUT)/tests/scenarios: $(OUT)/tools/progs/scenarios.o $(SCHED_OBJS)
	$(call msg,LINK,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(TOOLS_LDFLAGS) $^ -o $@

# Same object, scheduler (and so every scheduler probe) in the shared library next to it.
$(OUT)/tests/scenarios-so: $(OUT)/tools/progs/scenarios.o $(OUT)/tests/libcorosched.so
	$(call msg,LINK,$@)
	$(Q)$(CC) $(TOOLS_LDFLAGS) $< -L$(OUT)/tests -lcorosched -Wl,-rpath,'$$ORIGIN' -o $@

# usdt_matrix: one source, built by several compilers at several levels.
$(OUT)/tests/usdt_matrix_c_O0: $(MATRIX_SRC) usdt/corobpf.h
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(MATRIX_FLAGS) -std=gnu11 -O0 $< -o $@

$(OUT)/tests/usdt_matrix_c_O2: $(MATRIX_SRC) usdt/corobpf.h
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(MATRIX_FLAGS) -std=gnu11 -O2 $< -o $@

$(OUT)/tests/usdt_matrix_cxx_O0: $(MATRIX_SRC) usdt/corobpf.h
	$(call msg,CXX,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CXX) $(MATRIX_FLAGS) -x c++ -std=gnu++17 -O0 $< -o $@

$(OUT)/tests/usdt_matrix_cxx_O2: $(MATRIX_SRC) usdt/corobpf.h
	$(call msg,CXX,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CXX) $(MATRIX_FLAGS) -x c++ -std=gnu++17 -O2 $< -o $@

# The five-byte-nop sites (COROBPF_NOP5), and a leaf whose red zone must survive them.
$(OUT)/tests/usdt_matrix_c_O2_nop5: $(MATRIX_SRC) usdt/corobpf.h
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(MATRIX_FLAGS) -std=gnu11 -O2 -DCOROBPF_NOP5 $< -o $@

$(OUT)/tests/redzone: tests/integration/progs/redzone.c usdt/corobpf.h
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) -O2 -g -Wall -Wextra -Iusdt -DCOROBPF_NOP5 $< -o $@

$(OUT)/tests/usdt_matrix_clang_O2: $(MATRIX_SRC) usdt/corobpf.h
	$(call msg,CLANG,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CLANG) $(MATRIX_FLAGS) -std=gnu11 -O2 $< -o $@

# Linked by lld, which maps the file page where RELRO ends twice: the semaphores
# must not be in it (usdt/corobpf.h starts them a page of their own).
$(OUT)/tests/usdt_matrix_clang_lld: $(MATRIX_SRC) usdt/corobpf.h
	$(call msg,CLANG,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CLANG) $(MATRIX_FLAGS) -std=gnu11 -O2 -fuse-ld=lld $< -o $@

# Probes inside a shared library function; the executable only calls it.
$(OUT)/tests/libusdt_matrix.so: $(MATRIX_SRC) usdt/corobpf.h
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(MATRIX_FLAGS) -std=gnu11 -O2 -fPIC -shared -DMATRIX_LIB \
		-Wl,-soname,libusdt_matrix.so $< -o $@

$(OUT)/tests/usdt_matrix_so: $(MATRIX_SRC) $(OUT)/tests/libusdt_matrix.so
	$(call msg,CC,$@)
	$(Q)$(CC) $(MATRIX_FLAGS) -std=gnu11 -O2 -DMATRIX_MAIN $< -L$(OUT)/tests -lusdt_matrix \
		-Wl,-rpath,'$$ORIGIN' -o $@

# early: probes in constructors (before main) and in a dlopened library.
$(OUT)/tests/libearly.so: tests/integration/progs/early_lib.c usdt/corobpf.h
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(MATRIX_FLAGS) -O2 -fPIC -shared -Wl,-soname,libearly.so $< -o $@

$(OUT)/tests/libdlprobe.so: tests/integration/progs/early_lib.c usdt/corobpf.h
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(MATRIX_FLAGS) -O2 -fPIC -shared -DCTOR_ID=0xd1 -DCTOR_NAME='"dl-ctor"' $< -o $@

$(OUT)/tests/early: tests/integration/progs/early.c $(OUT)/tests/libearly.so usdt/corobpf.h
	$(call msg,CC,$@)
	$(Q)$(CC) $(MATRIX_FLAGS) -O2 $< -L$(OUT)/tests -learly -ldl -Wl,-rpath,'$$ORIGIN' -o $@

# strings: names and spans from stack buffers, a far literal, NULL.
$(OUT)/tests/strings: tests/integration/progs/strings.c usdt/corobpf.h
	$(call msg,CC,$@)
	$(Q)$(CC) $(MATRIX_FLAGS) -O2 $< -o $@

# badstr: bad pointers given to the string probes, strings in pages nothing touched yet.
tools: $(OUT)/tests/badstr
$(OUT)/tests/badstr: tests/integration/progs/badstr.c usdt/corobpf.h
	$(call msg,CC,$@)
	$(Q)$(CC) $(MATRIX_FLAGS) -O2 $< -o $@

# bugs: one bug per run, on purpose, for the detectors; and a control.
$(OUT)/tests/bugs: tests/integration/progs/bugs.c $(SCHED_OBJS) $(SCHED_DEPS)
	$(call msg,CC,$@)
	$(Q)$(CC) $(TOOLS_CFLAGS) $< $(SCHED_OBJS) $(TOOLS_LDFLAGS) -o $@

# span_attach: spans open when a tracer attaches, and one real orphan span_end.
tools: $(OUT)/tests/span_attach
$(OUT)/tests/span_attach: tests/integration/progs/span_attach.c usdt/corobpf.h
	$(call msg,CC,$@)
	$(Q)$(CC) $(MATRIX_FLAGS) -O2 -pthread $< -o $@

# announce_mute: the announce probes, never answered.
$(OUT)/tests/announce_mute: tests/integration/progs/announce_mute.c usdt/corobpf.h
	$(call msg,CC,$@)
	$(Q)$(CC) $(MATRIX_FLAGS) -O2 $< -o $@

# announce_eager: a scheduler that answers while the tracer is still attaching.
$(OUT)/tests/announce_eager: tests/integration/progs/announce_eager.c usdt/corobpf.h
	$(call msg,CC,$@)
	$(Q)$(CC) $(MATRIX_FLAGS) -O2 -pthread $< -o $@

# announce: a running server's coroutines, told to a tracer that attaches.
$(OUT)/tests/announce: tests/integration/progs/announce.c $(SCHED_OBJS) $(SCHED_DEPS)
	$(call msg,CC,$@)
	$(Q)$(CC) $(TOOLS_CFLAGS) $< $(SCHED_OBJS) $(TOOLS_LDFLAGS) -o $@

$(OUT)/tests/spans: tests/integration/progs/spans.c $(SCHED_OBJS) $(SCHED_DEPS)
	$(call msg,CC,$@)
	$(Q)$(CC) $(TOOLS_CFLAGS) $< $(SCHED_OBJS) $(TOOLS_LDFLAGS) -o $@

# Unmodified schedulers (no corobpf probes) for the switch-function path: plain ucontext,
# Boost.Fiber (over Boost.Context) and GNU Pth, from Debian's packages.
$(OUT)/tests/uctx: tests/integration/progs/uctx.c
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) -O2 -g -Wall -Wextra -pthread $< -o $@

$(OUT)/tests/fibers: tests/integration/progs/fibers.cpp
	$(call msg,CXX,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CXX) -O2 -g -Wall -Wextra -std=gnu++17 $< -lboost_fiber -lboost_context -o $@

$(OUT)/tests/fibers-addr: tests/integration/progs/fibers.cpp
	$(call msg,CXX,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CXX) -O2 -g -Wall -Wextra -std=gnu++17 -DTAKE_ADDRESS $< -lboost_fiber -lboost_context -o $@

# attach_target: static for a chroot; with 400 and 600 extra argument specifications.
$(OUT)/tests/attach_target-static: tests/integration/progs/attach_target.c usdt/corobpf.h
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(MATRIX_FLAGS) -O2 -static $< -o $@

$(OUT)/tests/attach_target-specs%: tests/integration/progs/attach_target.c usdt/corobpf.h
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(MATRIX_FLAGS) -O2 -DSPECS_EXTRA=$* $< -o $@

# gate_flood: an unprivileged user's flood of the exec gate (static: nothing to search itself).
$(OUT)/tests/gate_flood: tests/integration/progs/gate_flood.c
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) -O2 -Wall -Wextra -static $< -o $@

$(OUT)/tests/static_plain: tests/integration/progs/static_plain.c
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) -O2 -static $< -o $@

# Reliability tests: threads by the thousand, fork, a crash, PID reuse (bare probes).
$(OUT)/tests/faults: tests/integration/progs/faults.c usdt/corobpf.h
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) -O2 -g -Wall -Wextra -Iusdt -pthread $< -o $@

# The same with five-byte sites: a child forked after they were traced runs them too.
$(OUT)/tests/faults-nop5: tests/integration/progs/faults.c usdt/corobpf.h
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) -O2 -g -Wall -Wextra -Iusdt -pthread -DCOROBPF_NOP5 $< -o $@

# --stacks: coroutines parked in known functions, in the executable and in a library, the
# whole program (scheduler included) built with frame pointers (stacks-fp), without
# (stacks-nofp), as a position-dependent executable (stacks-nopie, ET_EXEC), and linked by lld
# (stacks-lld: segments whose file offsets and addresses are not page-congruent).
STACKS_FLAGS_fp := -fno-omit-frame-pointer -mno-omit-leaf-frame-pointer
STACKS_FLAGS_nofp := -fomit-frame-pointer
STACKS_FLAGS_nopie := -fomit-frame-pointer -fno-pie
STACKS_LD_nopie := -no-pie
STACKS_FLAGS_lld := -fomit-frame-pointer
STACKS_LD_lld := -fuse-ld=lld
# The library's link (the executable's -no-pie has no place there).
STACKS_SOLD_lld := -fuse-ld=lld
.PRECIOUS: $(OUT)/tests/libstackslib-%.so

$(OUT)/tests/libstackslib-%.so: tests/integration/progs/stacks_lib.c $(SCHED_DEPS)
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(TOOLS_CFLAGS) $(STACKS_FLAGS_$*) -fPIC -shared $(STACKS_SOLD_$*) $< -o $@

$(OUT)/tests/stacks-%: tests/integration/progs/stacks.c $(OUT)/tests/libstackslib-%.so \
		tools/sched/corosched.c tools/sched/switch_x86_64.S $(SCHED_DEPS)
	$(call msg,CC,$@)
	$(Q)$(CC) $(TOOLS_CFLAGS) $(STACKS_FLAGS_$*) $< tools/sched/corosched.c \
		tools/sched/switch_x86_64.S -L$(OUT)/tests -lstackslib-$* -Wl,-rpath,'$$ORIGIN' \
		$(TOOLS_LDFLAGS) $(STACKS_LD_$*) -o $@

# hostile_elf: a probed program whose notes the tests rewrite as a hostile object would have
# them; hostile_many adds tens of thousands of notes.
$(OUT)/tests/hostile: tests/integration/progs/hostile.c usdt/corobpf.h
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(MATRIX_FLAGS) -O2 $< -o $@

$(OUT)/tests/hostile_many: tests/integration/progs/hostile.c tests/integration/progs/hostile_many.S \
		usdt/corobpf.h
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(MATRIX_FLAGS) -O2 $(filter %.c %.S,$^) -o $@

$(OUT)/tests/pth: tests/integration/progs/pth.c
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) -O2 -g -Wall -Wextra $< -lpth -o $@

# Benchmarks (make bench): the floor (an empty BPF program on the same site), a probe loop
# with and without probes, and a synthetic raw capture generator for the replay path.
BENCH_BINS := $(OUT)/bench/floor $(OUT)/bench/probe_loop $(OUT)/bench/probe_loop_off \
	      $(OUT)/bench/probe_loop_nop5 $(OUT)/bench/probe_loop_fp $(OUT)/bench/gen_raw \
	      $(OUT)/bench/flood

bench-tools: $(BENCH_BINS)

# The switch rows' workloads report their own CPU time through it (tools/bench/cpu_preload.c).
bench-tools: $(OUT)/bench/cpu_preload.so

$(OUT)/bench/cpu_preload.so: tools/bench/cpu_preload.c
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) -O2 -Wall -shared -fPIC $< -o $@

$(OUT)/bench/floor.bpf.o: tools/bench/floor.bpf.c $(OUT)/vmlinux.h
	$(call msg,BPF,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CLANG) $(BPF_CFLAGS) -c $< -o $@

$(OUT)/bench/floor.skel.h: $(OUT)/bench/floor.bpf.o
	$(call msg,GEN-SKEL,$@)
	$(Q)$(BPFTOOL) gen skeleton $< name floor_bpf > $@.tmp && mv $@.tmp $@

$(OUT)/bench/floor: tools/bench/floor.c $(OUT)/bench/floor.skel.h
	$(call msg,CC,$@)
	$(Q)$(CC) -O2 -g -Wall -I$(OUT)/bench $< -o $@ -lbpf -lelf -lz

$(OUT)/bench/probe_loop: tools/bench/probe_loop.c usdt/corobpf.h
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) -O2 -g -Wall -Iusdt $< -o $@

# The flood section's producer (threads firing ready flat out) and its in-target limit.
$(OUT)/bench/flood: tools/bench/flood.c usdt/corobpf.h
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) -O2 -g -Wall -Wextra -pthread -Iusdt $< -o $@

$(OUT)/bench/probe_loop_nop5: tools/bench/probe_loop.c usdt/corobpf.h
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) -O2 -g -Wall -Iusdt -DCOROBPF_NOP5 $< -o $@

# With frame pointers: --stacks=fp walks them (without, it reads garbage and faults).
$(OUT)/bench/probe_loop_fp: tools/bench/probe_loop.c usdt/corobpf.h
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) -O2 -g -Wall -Iusdt -fno-omit-frame-pointer $< -o $@

$(OUT)/bench/probe_loop_off: tools/bench/probe_loop.c usdt/corobpf.h
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) -O2 -g -Wall -Iusdt -DCOROBPF_DISABLE $< -o $@

$(OUT)/bench/gen_raw: tools/bench/gen_raw.c $(USER_LIB_OBJS)
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(CFLAGS) $< $(USER_LIB_OBJS) -o $@ $(LDLIBS)

# Go programs (golang-go), built only where go is installed: suite_21_go.py and the bench's
# Go row skip without them, saying why (in CI, where tools/deps.sh installs go, they fail).
# Standard library only and offline: GOPATH mode (no module lookups, no proxy), the build
# cache in a temporary directory removed after the build. goprog-stripped has no symbol table
# and no DWARF (-s -w), as many release binaries ship; goprog-nodwarf keeps its symbols only
# (-w); goprog-pie is position-independent. Both programs import GO_TRACE's start from
# tools/go/src/gotrace.
GO ?= $(shell command -v go 2>/dev/null)
GOTRACE_SRC := tools/go/src/gotrace/gotrace.go
go_build = d=$$(mktemp -d) && GOCACHE=$$d/cache GOPATH=$$d/path:$(CURDIR)/tools/go \
	GO111MODULE=off GOPROXY=off GOFLAGS= $(GO) build $(1) -o $@ $< ; s=$$?; rm -rf $$d; exit $$s

ifneq ($(GO),)
tools: $(OUT)/tests/go/goprog $(OUT)/tests/go/goprog-stripped $(OUT)/tests/go/goprog-nodwarf \
       $(OUT)/tests/go/goprog-pie $(OUT)/tests/go/goload \
       $(OUT)/tests/go/goserver
bench-tools: $(OUT)/bench/go_pingpong

$(OUT)/tests/go/goprog: tests/integration/progs/go/goprog.go $(GOTRACE_SRC)
	$(call msg,GO,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(call go_build,)

$(OUT)/tests/go/goprog-stripped: tests/integration/progs/go/goprog.go $(GOTRACE_SRC)
	$(call msg,GO,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(call go_build,"-ldflags=-s -w")

$(OUT)/tests/go/goprog-nodwarf: tests/integration/progs/go/goprog.go $(GOTRACE_SRC)
	$(call msg,GO,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(call go_build,-ldflags=-w)

$(OUT)/tests/go/goprog-pie: tests/integration/progs/go/goprog.go $(GOTRACE_SRC)
	$(call msg,GO,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(call go_build,-buildmode=pie)

$(OUT)/tests/go/goload: tests/integration/progs/go/goload.go
	$(call msg,GO,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(call go_build,)

# The precision corpus's Go server (suite_28_precision.py).
$(OUT)/tests/go/goserver: tests/integration/progs/go/goserver.go
	$(call msg,GO,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(call go_build,)

$(OUT)/bench/go_pingpong: tools/bench/go_pingpong.go $(GOTRACE_SRC)
	$(call msg,GO,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(call go_build,)
endif

# C++20 coroutines (suite_22_cxx20.py): the executor program (tests/integration/progs/cxx20)
# built by g++ and clang++ at -O0 and -O2 with no probes, and once with the promise adapter
# (usdt/corobpf_coro.hpp) and a hook that counts its traced branches; a Boost.Asio program
# (libboost-dev). A compiler or Boost missing leaves its binaries out (the suite skips them,
# saying so; in CI it fails).
# Boost 1.74's Asio does not detect clang 14's coroutines over libstdc++: told so.
CXX20_CLANGXX ?= clang++
CXX20_DIR := tests/integration/progs/cxx20
CXX20_DEPS := $(CXX20_DIR)/exec.hpp usdt/corobpf_coro.hpp usdt/corobpf.h
CXX20_FLAGS := -std=c++20 -g -Wall -Wextra -pthread -Iusdt
CXX20_ASIO_CLANG := -DBOOST_ASIO_HAS_CO_AWAIT=1 -DBOOST_ASIO_HAS_STD_COROUTINE=1
CXX20_HAVE_GXX := $(shell command -v $(CXX) 2>/dev/null)
CXX20_HAVE_CLANGXX := $(shell command -v $(CXX20_CLANGXX) 2>/dev/null)
CXX20_HAVE_ASIO := $(wildcard /usr/include/boost/asio.hpp)
CXX20_BINS := $(if $(CXX20_HAVE_GXX),$(addprefix $(OUT)/tests/cxx20_tasks-,gcc-O0 gcc-O2 adapter)) \
	      $(if $(CXX20_HAVE_CLANGXX),$(addprefix $(OUT)/tests/cxx20_tasks-,clang-O0 clang-O2 \
		adapter-clang))
# The executor without the adapter but with one unrelated probe of corobpf.h: its coroutines
# must stay traced (the adapter is told apart per coroutine, not per object).
CXX20_BINS += $(if $(CXX20_HAVE_GXX),$(OUT)/tests/cxx20_tasks-probe) \
	      $(if $(CXX20_HAVE_CLANGXX),$(OUT)/tests/cxx20_tasks-probe-clang)
ifneq ($(CXX20_HAVE_ASIO),)
CXX20_BINS += $(if $(CXX20_HAVE_GXX),$(OUT)/tests/cxx20_asio-gcc) \
	      $(if $(CXX20_HAVE_CLANGXX),$(OUT)/tests/cxx20_asio-clang)
endif

tools: $(CXX20_BINS)

$(OUT)/tests/cxx20_tasks-gcc-%: $(CXX20_DIR)/tasks.cpp $(CXX20_DEPS)
	$(call msg,CXX,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CXX) $(CXX20_FLAGS) -$* $< -o $@

$(OUT)/tests/cxx20_tasks-clang-%: $(CXX20_DIR)/tasks.cpp $(CXX20_DEPS)
	$(call msg,CLANG,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CXX20_CLANGXX) $(CXX20_FLAGS) -$* $< -o $@

$(OUT)/tests/cxx20_tasks-adapter: $(CXX20_DIR)/tasks.cpp $(CXX20_DEPS)
	$(call msg,CXX,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CXX) $(CXX20_FLAGS) -O2 -DWITH_ADAPTER -DCOUNT_HOOKS $< -o $@

$(OUT)/tests/cxx20_tasks-adapter-clang: $(CXX20_DIR)/tasks.cpp $(CXX20_DEPS)
	$(call msg,CLANG,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CXX20_CLANGXX) $(CXX20_FLAGS) -O2 -DWITH_ADAPTER -DCOUNT_HOOKS $< -o $@

$(OUT)/tests/cxx20_tasks-probe: $(CXX20_DIR)/tasks.cpp $(CXX20_DEPS)
	$(call msg,CXX,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CXX) $(CXX20_FLAGS) -O2 -DUNRELATED_PROBE $< -o $@

$(OUT)/tests/cxx20_tasks-probe-clang: $(CXX20_DIR)/tasks.cpp $(CXX20_DEPS)
	$(call msg,CLANG,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CXX20_CLANGXX) $(CXX20_FLAGS) -O0 -DUNRELATED_PROBE $< -o $@

$(OUT)/tests/cxx20_asio-gcc: $(CXX20_DIR)/asio_echo.cpp
	$(call msg,CXX,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CXX) $(CXX20_FLAGS) -O2 $< -o $@

$(OUT)/tests/cxx20_asio-clang: $(CXX20_DIR)/asio_echo.cpp
	$(call msg,CLANG,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CXX20_CLANGXX) $(CXX20_FLAGS) $(CXX20_ASIO_CLANG) -O2 $< -o $@

# make bench: the adapter program with its probes, and with them compiled out.
bench-tools: $(OUT)/bench/cxx20_tasks_adapter $(OUT)/bench/cxx20_tasks_adapter_off

$(OUT)/bench/cxx20_tasks_adapter: $(CXX20_DIR)/tasks.cpp $(CXX20_DEPS)
	$(call msg,CXX,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CXX) $(CXX20_FLAGS) -O2 -DWITH_ADAPTER $< -o $@

$(OUT)/bench/cxx20_tasks_adapter_off: $(CXX20_DIR)/tasks.cpp $(CXX20_DEPS)
	$(call msg,CXX,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CXX) $(CXX20_FLAGS) -O2 -DWITH_ADAPTER -DCOROBPF_DISABLE $< -o $@
