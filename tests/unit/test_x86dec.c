// SPDX-License-Identifier: MIT
/*
 * Unit tests of user/elf/x86dec.c. The oracle for instruction lengths is
 * objdump (binutils): every instruction it decodes in the .text of real
 * libraries on this machine (libc, libstdc++, libboost_context, libpth,
 * libcrypto when present) must have the same length here. Register effects
 * and the uprobe cost classes are checked on hand-assembled bytes.
 */
#include <gelf.h>
#include <fcntl.h>
#include <unistd.h>

#include "unit.h"
#include "x86dec.h"

struct text {
	uint8_t *bytes;
	uint64_t addr, size;
};

static bool load_text(const char *path, struct text *t)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	Elf *e;
	Elf_Scn *scn = NULL;
	size_t shstrndx;
	bool ok = false;

	memset(t, 0, sizeof(*t));
	if (fd < 0)
		return false;
	elf_version(EV_CURRENT);
	e = elf_begin(fd, ELF_C_READ, NULL);
	if (e && elf_getshdrstrndx(e, &shstrndx) == 0) {
		while ((scn = elf_nextscn(e, scn))) {
			GElf_Shdr sh;
			Elf_Data *d;
			const char *name;

			if (!gelf_getshdr(scn, &sh))
				continue;
			name = elf_strptr(e, shstrndx, sh.sh_name);
			if (!name || strcmp(name, ".text"))
				continue;
			d = elf_getdata(scn, NULL);
			if (!d || d->d_size != sh.sh_size)
				break;
			t->bytes = malloc(d->d_size);
			memcpy(t->bytes, d->d_buf, d->d_size);
			t->addr = sh.sh_addr;
			t->size = d->d_size;
			ok = true;
			break;
		}
	}
	if (e)
		elf_end(e);
	close(fd);
	return ok;
}

/*
 * Every instruction objdump lists in .text: our length must be the
 * distance to objdump's next instruction. Returns the number compared.
 */
static long compare_with_objdump(const char *path, long *mismatches)
{
	struct text t;
	char cmd[1024], line[512];
	FILE *p;
	uint64_t prev = 0;
	bool have_prev = false, prev_ok = false;
	long compared = 0;

	*mismatches = 0;
	if (!load_text(path, &t))
		return -1;
	snprintf(cmd, sizeof(cmd), "objdump -d -z --no-show-raw-insn -j .text '%s' 2>/dev/null",
		 path);
	p = popen(cmd, "r");
	if (!p) {
		free(t.bytes);
		return -1;
	}
	while (fgets(line, sizeof(line), p)) {
		unsigned long a;
		char mn[64] = "";
		int n = 0;

		/* "  4bf10:\tmov    %rbx,0x80(%rdi)" */
		if (sscanf(line, " %lx:%n", &a, &n) != 1 || line[n] != '\t')
			continue;
		sscanf(line + n + 1, "%63s", mn);
		if (have_prev && prev_ok && a > prev && a - prev <= 15) {
			struct x86_insn in;
			int len = x86_decode(t.bytes + (prev - t.addr), t.addr + t.size - prev, prev, &in);

			const uint8_t *b = t.bytes + (prev - t.addr);

			compared++;
			/*
			 * objdump prints fwait and the x87 instruction after it as one
			 * (fstcw); the processor and the kernel's decoder see two. And a
			 * 66-prefixed near branch is rel32 in 64-bit mode (as the kernel
			 * decodes it); objdump decodes it as rel16, which only happens in
			 * data between functions.
			 */
			if (b[0] == 0x9b && len == 1)
				len = (int)(a - prev);
			if (b[0] == 0x66 && (b[1] == 0xe8 || b[1] == 0xe9 || (b[1] & 0xf0) == 0x70 ||
					     (b[1] == 0x0f && (b[2] & 0xf0) == 0x80)))
				len = (int)(a - prev);
			if (len != (int)(a - prev)) {
				if (++*mismatches <= 10)
					fprintf(stderr, "%s: at 0x%lx objdump says %lu bytes, we say %d\n",
						path, (unsigned long)prev, (unsigned long)(a - prev), len);
			}
		}
		have_prev = a >= t.addr && a < t.addr + t.size;
		/* objdump's own failures and prefixes it prints alone are not comparable. */
		prev_ok = have_prev && !strstr(line, "(bad)") && strncmp(mn, ".byte", 5) &&
			  strcmp(mn, "rex") && strncmp(mn, "rex.", 4) && strcmp(mn, "data16") &&
			  strcmp(mn, "addr32") && strcmp(mn, "cs") && strcmp(mn, "ds") &&
			  strcmp(mn, "ss") && strcmp(mn, "es") && strcmp(mn, "fs") && strcmp(mn, "gs") &&
			  strcmp(mn, "lock") && strcmp(mn, "bnd") && strcmp(mn, "notrack") &&
			  strcmp(mn, "repz") && strcmp(mn, "repnz") && strcmp(mn, "rep") &&
			  strcmp(mn, "xacquire") && strcmp(mn, "xrelease");
		prev = a;
	}
	pclose(p);
	free(t.bytes);
	return compared;
}

static const char *const libs[] = {
	"/lib/x86_64-linux-gnu/libc.so.6",
	"/lib/x86_64-linux-gnu/libm.so.6",
	"/usr/lib/x86_64-linux-gnu/libstdc++.so.6",
	"/usr/lib/x86_64-linux-gnu/libboost_context.so.1.74.0",
	"/usr/lib/x86_64-linux-gnu/libboost_fiber.so.1.74.0",
	"/usr/lib/x86_64-linux-gnu/libpth.so.20",
	"/usr/lib/x86_64-linux-gnu/libcrypto.so.3",
	"/usr/lib/x86_64-linux-gnu/libz.so.1",
	"/usr/lib/x86_64-linux-gnu/libsqlite3.so.0",
	"/usr/lib/x86_64-linux-gnu/libbpf.so.1",
};

TEST(lengths_match_objdump)
{
	long total = 0, bad = 0;
	int files = 0;

	if (system("objdump --version >/dev/null 2>&1") != 0) {
		CHECK(!"objdump (binutils) is needed as the oracle");
		return;
	}
	for (size_t i = 0; i < sizeof(libs) / sizeof(libs[0]); i++) {
		long mism, n;

		if (access(libs[i], R_OK))
			continue;
		n = compare_with_objdump(libs[i], &mism);
		CHECK(n > 100);
		if (n <= 0)
			continue;
		files++;
		total += n;
		bad += mism;
	}
	/* libc is always there; the Boost and Pth libraries come with the test dependencies. */
	CHECK(files >= 3);
	CHECK_EQ(bad, 0);
	if (getenv("UNIT_VERBOSE"))
		fprintf(stderr, "x86dec: %ld instructions in %d libraries, %ld mismatches\n",
			total, files, bad);
}

/* The bytes written in hex ("0f 1f 44 00 00") into b[16]; how many. */
static size_t hex_bytes(const char *hex, uint8_t *b)
{
	size_t n = 0;

	while (*hex && n < 16) {
		unsigned v;

		if (*hex == ' ') {
			hex++;
			continue;
		}
		sscanf(hex, "%2x", &v);
		b[n++] = (uint8_t)v;
		hex += 2;
	}
	return n;
}

static struct x86_insn dec(const char *hex)
{
	uint8_t b[16];
	size_t n = hex_bytes(hex, b);
	struct x86_insn in;

	memset(&in, 0, sizeof(in));
	in.len = (uint8_t)x86_decode(b, n, 0x1000, &in);
	return in;
}

TEST(register_effects)
{
	struct x86_insn in;

	in = dec("49 89 f4"); /* mov %rsi,%r12 */
	CHECK_EQ(in.len, 3);
	CHECK_EQ(in.copy_src, X86_RSI);
	CHECK_EQ(in.copy_dst, X86_R12);
	in = dec("49 89 f9"); /* mov %rdi,%r9 */
	CHECK_EQ(in.copy_src, X86_RDI);
	CHECK_EQ(in.copy_dst, X86_R9);
	in = dec("48 89 9f 80 00 00 00"); /* mov %rbx,0x80(%rdi): memory only */
	CHECK(in.writes_known);
	CHECK_EQ(in.writes, 0);
	in = dec("48 8d 96 28 01 00 00"); /* lea 0x128(%rsi),%rdx */
	CHECK(in.writes_known);
	CHECK_EQ(in.writes, 1 << X86_RDX);
	CHECK_EQ(in.copy_src, -1);
	in = dec("bf 02 00 00 00"); /* mov $2,%edi */
	CHECK_EQ(in.writes, 1 << X86_RDI);
	in = dec("41 ba 08 00 00 00"); /* mov $8,%r10d */
	CHECK_EQ(in.writes, 1 << X86_R10);
	in = dec("0f 05"); /* syscall */
	CHECK_EQ(in.writes, (1 << X86_RAX) | (1 << X86_RCX) | (1 << X86_R11));
	in = dec("48 3d 01 f0 ff ff"); /* cmp $-4095,%rax */
	CHECK(in.writes_known);
	CHECK_EQ(in.writes, 0);
	in = dec("d9 31"); /* fnstenv (%rcx) */
	CHECK(in.writes_known);
	CHECK_EQ(in.writes, 0);
	in = dec("0f ae 9f c0 01 00 00"); /* stmxcsr 0x1c0(%rdi) */
	CHECK(in.writes_known);
	CHECK_EQ(in.writes, 0);
	in = dec("57"); /* push %rdi */
	CHECK_EQ(in.push_reg, X86_RDI);
	in = dec("5a"); /* pop %rdx */
	CHECK_EQ(in.pop_reg, X86_RDX);
	in = dec("0f ba e3 0c"); /* bt $0xc,%ebx (Go's casgstatus): reads only */
	CHECK(in.writes_known);
	CHECK_EQ(in.writes, 0);
	in = dec("0f ba eb 0c"); /* bts $0xc,%ebx: writes it */
	CHECK_EQ(in.writes, 1 << X86_RBX);
	in = dec("66 0f 6f 07"); /* movdqa (%rdi),%xmm0: not an integer instruction we model */
	CHECK_EQ(in.len, 4);
	CHECK(!in.writes_known);
}

TEST(uprobe_cost_classes)
{
	struct x86_insn in;

	in = dec("73 5e"); /* jae rel8 */
	CHECK_EQ(in.uprobe, X86_UPROBE_EMULATED);
	CHECK_EQ(in.flow, X86_FLOW_JCC);
	CHECK_EQ(in.target, 0x1000 + 2 + 0x5e);
	in = dec("0f 83 10 00 00 00"); /* jae rel32 */
	CHECK_EQ(in.uprobe, X86_UPROBE_EMULATED);
	CHECK_EQ(in.target, 0x1000 + 6 + 0x10);
	in = dec("e8 fb ff ff ff"); /* call rel32 back to itself */
	CHECK_EQ(in.uprobe, X86_UPROBE_EMULATED);
	CHECK_EQ(in.flow, X86_FLOW_CALL);
	CHECK_EQ(in.target, 0x1000);
	in = dec("90");
	CHECK_EQ(in.uprobe, X86_UPROBE_EMULATED);
	in = dec("0f 1f 40 00"); /* a multi-byte nop is single-stepped (measured) */
	CHECK_EQ(in.uprobe, X86_UPROBE_STEPPED);
	in = dec("57"); /* push %rdi */
	CHECK_EQ(in.uprobe, X86_UPROBE_EMULATED);
	in = dec("41 57"); /* push %r15 */
	CHECK_EQ(in.uprobe, X86_UPROBE_EMULATED);
	in = dec("48 89 9f 80 00 00 00"); /* a store is stepped */
	CHECK_EQ(in.uprobe, X86_UPROBE_STEPPED);
	in = dec("48 8d 64 24 c8"); /* lea -0x38(%rsp),%rsp */
	CHECK_EQ(in.uprobe, X86_UPROBE_STEPPED);
	in = dec("41 ff e0"); /* jmp *%r8 */
	CHECK_EQ(in.uprobe, X86_UPROBE_STEPPED);
	CHECK_EQ(in.flow, X86_FLOW_INDIRECT);
	in = dec("c3");
	CHECK_EQ(in.flow, X86_FLOW_RET);
	in = dec("cc");
	CHECK_EQ(in.uprobe, X86_UPROBE_REFUSED);
	/* Cut off, or not an instruction in 64-bit mode. */
	CHECK_EQ(dec("0f").len, 0);
	CHECK_EQ(dec("48 8b").len, 0);
	CHECK_EQ(dec("06").len, 0);
	CHECK_EQ(dec("e8 00 00").len, 0);
}

/* The bytes of hex, for x86_uprobe_may_optimize(). */
static bool may_optimize(const char *hex)
{
	uint8_t b[16];
	size_t n = hex_bytes(hex, b);

	return x86_uprobe_may_optimize(b, n);
}

/* What a kernel that optimizes uprobes may turn into a call: attachctx.c refuses those. */
TEST(uprobe_optimizable_nops)
{
	CHECK(may_optimize("0f 1f 44 00 00"));		       /* the canonical nop5 (COROBPF_NOP5) */
	CHECK(may_optimize("0f 1f 44 00 08"));		       /* -mnop-mcount's */
	CHECK(may_optimize("66 66 66 66 90"));		       /* 0x90 with prefixes */
	CHECK(may_optimize("66 0f 1f 40 00"));		       /* nopw 0x0(%rax) */
	CHECK(may_optimize("66 2e 0f 1f 84 00 00 00 00 00")); /* the ten-byte one */
	CHECK(!may_optimize("90"));
	CHECK(!may_optimize("0f 1f 40 00"));		      /* four bytes */
	CHECK(!may_optimize("66 0f 1f 44 00 00"));	      /* six */
	CHECK(!may_optimize("0f 1f 80 00 00 00 00"));	      /* seven */
	CHECK(!may_optimize("0f 1f 4c 00 00"));		      /* 0f 1f /1: not the nop */
	CHECK(!may_optimize("41 90 90 90 90"));		      /* xchg %eax,%r8d */
	CHECK(!may_optimize("48 8d 64 24 80"));		      /* the step before a nop5 site */
	CHECK(!may_optimize("e8 00 00 00 00"));		      /* a call */
	CHECK(!may_optimize("0f 1f 44 00"));		      /* cut off */
}

TEST(encodings_lengths)
{
	CHECK_EQ(dec("48 b8 01 02 03 04 05 06 07 08").len, 10); /* movabs */
	CHECK_EQ(dec("66 b8 01 02").len, 4);
	CHECK_EQ(dec("c5 f8 77").len, 3);			 /* vzeroupper */
	CHECK_EQ(dec("c4 e3 79 16 c0 01").len, 6);		 /* vpextrd $1,%xmm0,%eax */
	CHECK_EQ(dec("62 f1 7c 48 28 07").len, 6);		 /* vmovaps (%rdi),%zmm0 */
	CHECK_EQ(dec("62 f1 7c 48 28 47 01").len, 7);		 /* disp8*N */
	CHECK_EQ(dec("f3 0f 1e fa").len, 4);			 /* endbr64 */
	CHECK_EQ(dec("66 2e 0f 1f 84 00 00 00 00 00").len, 10); /* cs nopw */
	CHECK_EQ(dec("f7 c7 01 00 00 00").len, 6);		 /* test $1,%edi */
	CHECK_EQ(dec("f6 c1 01").len, 3);			 /* test $1,%cl */
	CHECK_EQ(dec("f7 d8").len, 2);				 /* neg %eax */
	CHECK_EQ(dec("a1 88 77 66 55 44 33 22 11").len, 9);	 /* movabs moffs,%eax */
	CHECK_EQ(dec("c8 10 00 00").len, 4);			 /* enter */
	CHECK_EQ(dec("8b 04 25 00 10 00 00").len, 7);		 /* sib, no base, disp32 */
	CHECK_EQ(dec("64 48 8b 04 25 28 00 00 00").len, 9);	 /* mov %fs:0x28,%rax */
}

int main(void)
{
	RUN(lengths_match_objdump);
	RUN(register_effects);
	RUN(uprobe_cost_classes);
	RUN(uprobe_optimizable_nops);
	RUN(encodings_lengths);
	return unit_done();
}
