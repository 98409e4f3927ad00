# corobpf: build, install, test, demo, bench.   `make V=1` shows the commands.
#
#   make                 ./corobpf (BPF object embedded through a bpftool skeleton)
#   make test            the structure check, unit tests, then integration tests (real BPF; root)
#   make structure       tools/check_structure.py: no include circle, a header per module, no file
#                        over 1,200 lines, stages in order, writers on decoded events only
#   make demo            trace the bundled demo scheduler into out/demo.*
#   make install PREFIX=/usr/local
#   make bench           side-by-side overhead and throughput benchmarks
#   make soak            an hour of steady tracing; corobpf's memory must stay flat
#   make soak-flight     the same under --flight 2, a dump every minute
#   make asan-test       unit tests and replays under AddressSanitizer and UBSan
#   make tsan-test       the reader and the model thread under ThreadSanitizer (live, as root)
#   make fuzz            the capture and JSONL readers under libFuzzer (FUZZ_SECONDS=60 each)

PREFIX ?= /usr/local
OUT := build
CC ?= cc
CLANG ?= clang
BPFTOOL ?= $(shell command -v bpftool 2>/dev/null || echo /usr/sbin/bpftool)
ARCH := $(shell uname -m | sed 's/x86_64/x86/;s/aarch64/arm64/')
MULTIARCH := $(shell $(CC) -print-multiarch 2>/dev/null)
VMLINUX_BTF ?= /sys/kernel/btf/vmlinux
VERSION := 0.1.0

CFLAGS ?= -O3 -g
override CFLAGS += $(SAN) -std=gnu11 -Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers \
	  -D_GNU_SOURCE -DCOROBPF_VERSION='"$(VERSION)"' -I$(OUT) -Ibpf -Iusdt $(USER_INCS)
# corobpf top draws with ncurses: the wide-character library where pkg-config knows it.
CURSES_LIBS := $(shell pkg-config --libs ncursesw 2>/dev/null || echo -lncurses)
LDLIBS := -lbpf -ldw -lelf -lz -lsqlite3 -lpthread -lstdc++ $(CURSES_LIBS)
BPF_CFLAGS := -g -O2 -target bpf -D__TARGET_ARCH_$(ARCH) -I$(OUT) -Ibpf -Iusdt \
	      $(if $(MULTIARCH),-I/usr/include/$(MULTIARCH)) -Wall -Wno-unused-function

ifeq ($(V),1)
Q :=
msg :=
else
Q := @
msg = @printf '  %-8s %s\n' "$(1)" "$(2)";
endif

# user/: the loader, a folder per stage of the data flow (docs/design.md, "Source layout").
USER_DIRS := user user/session user/capture user/outputs user/model user/elf user/record user/common
USER_INCS := $(addprefix -I,$(USER_DIRS)) -I/usr/include/postgresql
USER_HDRS := $(foreach d,$(USER_DIRS),$(wildcard $(d)/*.h))
vpath %.c $(USER_DIRS)

USER_LIB_SRCS := $(addprefix user/common/,log.c util.c termsafe.c safeopen.c procfs.c procview.c) \
		 $(addprefix user/record/,kinds.c raw.c recsink.c reorder.c) \
		 $(addprefix user/elf/,elfnotes.c dynlink.c sitebounds.c ldpaths.c ldcache.c ldhwcaps.c x86dec.c switchfam.c addrnames.c \
		   switchspec.c fam_runtimes.c goelf.c interp.c cxxcoro.c) \
		 $(addprefix user/model/,ctxmap.c cxxmap.c spans.c model.c lifecycle.c apply.c analyze.c stacks.c \
		   counters.c finding.c gomodel.c jsonl_read.c) \
		 $(addprefix user/outputs/,output.c jsonl.c pf_wire.c perfetto.c sqlite.c csv.c summary.c \
		   report.c ps.c spanrep.c pgstore.c pgconn.c pgparams.c pglib.c tables.c) \
		 user/session/pipeline.c user/session/modelq.c
USER_LIVE_SRCS := $(addprefix user/capture/,stackres.c capture.c ringev.c liverec.c attach.c \
		    attachctx.c usdt.c execgate.c execsearch.c gatewatch.c ringfill.c gowalk.c cxxattach.c \
		    interpattach.c batch.c signals.c stopper.c preflight.c unseen.c gatestats.c launch.c announce.c atattach.c) \
		  user/outputs/top.c user/outputs/status.c $(addprefix user/session/,flight.c session.c) \
		  user/main.c
USER_LIB_OBJS := $(patsubst %.c,$(OUT)/%.o,$(notdir $(USER_LIB_SRCS)))
USER_LIVE_OBJS := $(patsubst %.c,$(OUT)/%.o,$(notdir $(USER_LIVE_SRCS)))
UNIT_SRCS := $(wildcard tests/unit/test_*.c)
UNIT_BINS := $(patsubst tests/unit/%.c,$(OUT)/tests/%,$(UNIT_SRCS))

.PHONY: all clean install test unit integration demo bench soak soak-flight tools bench-tools asan asan-test tsan tsan-test \
	fuzz fuzz-build fuzz-short structure
.DELETE_ON_ERROR:

all: corobpf tools

$(OUT):
	$(Q)mkdir -p $(OUT) $(OUT)/tests

$(OUT)/vmlinux.h: | $(OUT)
	$(call msg,GEN,$@)
	$(Q)test -r $(VMLINUX_BTF) || { echo "error: $(VMLINUX_BTF) missing: corobpf needs a kernel built with CONFIG_DEBUG_INFO_BTF=y" >&2; exit 1; }
	$(Q)$(BPFTOOL) btf dump file $(VMLINUX_BTF) format c > $@.tmp && mv $@.tmp $@

$(OUT)/corobpf.bpf.o: bpf/corobpf.bpf.c bpf/coro_abi.h bpf/batch.bpf.h bpf/interp.bpf.h usdt/corobpf.h $(OUT)/vmlinux.h
	$(call msg,BPF,$@)
	$(Q)$(CLANG) $(BPF_CFLAGS) -c $< -o $@

$(OUT)/corobpf.skel.h: $(OUT)/corobpf.bpf.o
	$(call msg,GEN-SKEL,$@)
	$(Q)$(BPFTOOL) gen skeleton $< name corobpf_bpf > $@.tmp && mv $@.tmp $@

$(USER_LIB_OBJS) $(USER_LIVE_OBJS): $(OUT)/%.o: %.c $(USER_HDRS) bpf/coro_abi.h | $(OUT)
	$(call msg,CC,$@)
	$(Q)$(CC) $(CFLAGS) -c $< -o $@

$(OUT)/capture.o: $(OUT)/corobpf.skel.h
$(OUT)/ringfill.o: $(OUT)/corobpf.skel.h
$(OUT)/batch.o: $(OUT)/corobpf.skel.h
$(OUT)/atattach.o: $(OUT)/corobpf.skel.h

corobpf: $(USER_LIB_OBJS) $(USER_LIVE_OBJS)
	$(call msg,LINK,$@)
	$(Q)$(CC) $(CFLAGS) $^ -o $@ $(LDFLAGS) $(LDLIBS)

# The same program built elsewhere (make asan: build-asan/corobpf).
$(OUT)/corobpf: $(USER_LIB_OBJS) $(USER_LIVE_OBJS)
	$(call msg,LINK,$@)
	$(Q)$(CC) $(CFLAGS) $^ -o $@ $(LDFLAGS) $(LDLIBS)

include tools/tools.mk

$(OUT)/tests/test_%: tests/unit/test_%.c tests/unit/unit.h $(USER_LIB_OBJS) | $(OUT)
	$(call msg,CC,$@)
	$(Q)$(CC) $(CFLAGS) -Itests/unit $< $(USER_LIB_OBJS) -o $@ $(LDFLAGS) $(LDLIBS)

unit: $(UNIT_BINS)
	$(Q)for t in $(UNIT_BINS); do $$t || exit 1; done

# LOAD=1: the suite under load (CPU hogs and an unrelated instrumented program). The whole
# suite runs on the default probe path (batched); then the tests of what the probes carry run
# again on the per-event trap path (--probe-path trap, still an option). Not suite_27's batch_
# tests: each names its probe path, so a second pass would run them exactly as the first; nor
# those of what has no corobpf probes (Go, gevent, Ruby, QEMU, Boost, asyncio: their switch
# functions and runtime probes are the same on both paths), of the docs, or of how a command
# is launched.
TRAP_PASS := scenarios_ usdt_ finding launch_ dlopen early all_mode sigint flight_ \
	     announce_attach announce_unanswered \
	     --skip go_ --skip precision_gevent --skip precision_go --skip precision_qemu \
	     --skip precision_ruby --skip precision_boost --skip docs_ --skip python_ \
	     --skip runtime_ --skip cli_launch --skip launch_file_replaced
# JOBS tests at a time (tests/integration/run.py -j: a measurement runs with nothing beside
# it); JOBS=1 runs them one after another.
JOBS ?= 2
integration: corobpf tools bench-tools
	$(Q)LOAD=$(LOAD) python3 tests/integration/run.py -j $(JOBS)
	$(Q)LOAD=$(LOAD) COROBPF_PROBE_PATH=trap python3 tests/integration/run.py -j $(JOBS) $(TRAP_PASS)

# The shape of user/ (docs/design.md, "Source layout"): it fails naming each file that breaks it.
structure:
	$(Q)python3 tools/check_structure.py

# The README's test command. The structure check and unit tests need no root; integration
# tests do. Then the sanitizer builds (unit tests, replays, live captures) and a short run of
# each fuzzer, side by side on two CPUs (none of them measures time).
test: structure unit integration
	$(Q)$(MAKE) -s -j2 asan-test tsan-test fuzz-short

# AddressSanitizer and UndefinedBehaviorSanitizer: corobpf and the unit tests built into
# build-asan/, the unit tests run, and captures of every kind replayed through it.
SAN_FLAGS := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
asan:
	$(Q)$(MAKE) -s OUT=build-asan CFLAGS="-O1 -g" SAN="$(SAN_FLAGS)" \
		build-asan/corobpf $(patsubst $(OUT)/%,build-asan/%,$(UNIT_BINS))

asan-test: asan corobpf tools bench-tools
	$(Q)for t in $(patsubst $(OUT)/%,build-asan/%,$(UNIT_BINS)); do $$t || exit 1; done
	$(Q)tests/fuzz/replay_asan.sh build-asan/corobpf

# ThreadSanitizer: corobpf and the queue's unit test built into build-tsan/; the unit test
# runs, then live captures whose reader and model thread run side by side (tests/tsan_live.sh).
TSAN_FLAGS := -fsanitize=thread -fno-omit-frame-pointer -Wno-tsan
tsan:
	$(Q)$(MAKE) -s OUT=build-tsan CFLAGS="-O1 -g" SAN="$(TSAN_FLAGS)" \
		build-tsan/corobpf build-tsan/tests/test_modelq

tsan-test: tsan corobpf tools bench-tools
	$(Q)build-tsan/tests/test_modelq
	$(Q)tests/tsan_live.sh build-tsan/corobpf

# libFuzzer (clang): the raw capture reader and the JSONL reader, each followed by the
# whole replay pipeline. FUZZ_SECONDS per target (default 60); a crash fails and leaves
# its input in build/fuzz/; add it to tests/fuzz/regress/ as a regression test.
FUZZ_SECONDS ?= 60
FUZZ_CFLAGS := -O1 -g -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all \
	       -fno-omit-frame-pointer -std=gnu11 -D_GNU_SOURCE -DCOROBPF_VERSION='"$(VERSION)"' \
	       -I$(OUT) -Ibpf -Iusdt $(USER_INCS) -Wno-unused-parameter
FUZZ_OBJS := $(patsubst %.c,$(OUT)/fuzz/%.o,$(notdir $(USER_LIB_SRCS)))

$(FUZZ_OBJS): $(OUT)/fuzz/%.o: %.c $(USER_HDRS) bpf/coro_abi.h
	$(call msg,CC-FUZZ,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CLANG) $(FUZZ_CFLAGS) -c $< -o $@

$(OUT)/fuzz/fuzz_raw: tests/fuzz/fuzz_replay.c $(FUZZ_OBJS)
	$(call msg,LINK,$@)
	$(Q)$(CLANG) $(FUZZ_CFLAGS) -fsanitize=fuzzer $^ -o $@ -ldw -lelf -lz -lsqlite3 -lpthread -lstdc++

$(OUT)/fuzz/fuzz_jsonl: tests/fuzz/fuzz_replay.c $(FUZZ_OBJS)
	$(call msg,LINK,$@)
	$(Q)$(CLANG) $(FUZZ_CFLAGS) -fsanitize=fuzzer -DFUZZ_JSONL $^ -o $@ -ldw -lelf -lz -lsqlite3 -lpthread -lstdc++

fuzz-build: $(OUT)/fuzz/fuzz_raw $(OUT)/fuzz/fuzz_jsonl bench-tools corobpf

fuzz: fuzz-build
	$(Q)tests/fuzz/run.sh $(OUT) $(FUZZ_SECONDS)

fuzz-short: fuzz-build
	$(Q)tests/fuzz/run.sh $(OUT) 20

demo: corobpf tools
	$(Q)tools/demo.sh

bench: corobpf tools bench-tools
	$(Q)python3 tools/bench/bench.py

# An hour of steady load (SOAK_SECONDS, SOAK_RATE): corobpf's RSS must stay flat.
soak: corobpf tools
	$(Q)python3 tools/bench/soak.py

soak-flight: corobpf tools
	$(Q)SOAK_FLIGHT=2 python3 tools/bench/soak.py

install: corobpf
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/include
	install -m 0755 corobpf $(DESTDIR)$(PREFIX)/bin/corobpf
	install -m 0644 usdt/corobpf.h $(DESTDIR)$(PREFIX)/include/corobpf.h
	install -m 0644 usdt/corobpf_coro.hpp $(DESTDIR)$(PREFIX)/include/corobpf_coro.hpp

clean:
	rm -rf $(OUT) build-asan build-tsan corobpf
