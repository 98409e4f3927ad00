// SPDX-License-Identifier: MIT
/*
 * Unit tests of user/elf/elfnotes.c and user/elf/ldpaths.c.
 *
 * The objects under test are compiled here, into a temporary directory, with
 * the system's cc, and the dynamic loader itself (through `ldd`) is the
 * oracle for library resolution: an answer that differs from what glibc does
 * on this machine is a bug, whatever the code believes the rules are.
 *
 * COROBPF_SRCDIR names the source tree (for usdt/corobpf.h) when the test
 * does not run from it; TEST_ELF_KEEP=1 keeps the temporary directory.
 */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "unit.h"

#include "dynlink.h"
#include "elfnotes.h"
#include "ldcache.h"
#include "ldpaths.h"

static char tmp[PATH_MAX - 64];	/* leaves room for the names below it */
static char srcdir[PATH_MAX];
static char libc_path[PATH_MAX];	/* libc.so.6 as ldd reports it for our programs */
/* Stable copies for ld_opts, which keeps pointers (tpath() recycles its buffers). */
static char llp_dir[PATH_MAX], llp2_dir[PATH_MAX];
static bool fixtures_ok;

#define MAX_LIST 128

struct list {
	char *v[MAX_LIST];
	size_t n;
};

static void list_free(struct list *l)
{
	size_t i;

	for (i = 0; i < l->n; i++)
		free(l->v[i]);
	l->n = 0;
}

static void list_add(struct list *l, const char *s)
{
	if (l->n < MAX_LIST)
		l->v[l->n++] = strdup(s);
}

static bool list_has(const struct list *l, const char *s)
{
	size_t i;

	for (i = 0; i < l->n; i++)
		if (strcmp(l->v[i], s) == 0)
			return true;
	return false;
}

/* Same members in the same order. */
static bool list_eq(const struct list *a, const struct list *b)
{
	size_t i;

	if (a->n != b->n)
		return false;
	for (i = 0; i < a->n; i++)
		if (strcmp(a->v[i], b->v[i]) != 0)
			return false;
	return true;
}

static void missing_print(const struct ld_opts *o)
{
	size_t i;

	for (i = 0; i < o->n_missing; i++)
		fprintf(stderr, "  missing %s (needed by %s): %s\n", o->missing[i].name,
			o->missing[i].needed_by, o->missing[i].reason);
}

static void list_print(const char *what, const struct list *l)
{
	size_t i;

	fprintf(stderr, "  %s (%zu):\n", what, l->n);
	for (i = 0; i < l->n; i++)
		fprintf(stderr, "    %s\n", l->v[i]);
}

static int sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static int sh(const char *fmt, ...)
{
	char cmd[8192];
	va_list ap;
	int st;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	st = system(cmd);
	if (st != 0)
		fprintf(stderr, "command failed (%d): %s\n", st, cmd);
	return st;
}

static char *tpath(const char *rel)
{
	static char bufs[8][PATH_MAX];
	static int next;
	char *b = bufs[next++ % 8];

	if (snprintf(b, PATH_MAX, "%s/%s", tmp, rel) >= PATH_MAX)
		fprintf(stderr, "path too long: %s/%s\n", tmp, rel);
	return b;
}

static void write_file(const char *path, const void *data, size_t len)
{
	FILE *f = fopen(path, "wb");

	if (!f || fwrite(data, 1, len, f) != len)
		fprintf(stderr, "cannot write %s\n", path);
	if (f)
		fclose(f);
}

static void *read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	long n;

	*len = 0;
	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	buf = malloc(n > 0 ? n : 1);
	if (buf && fread(buf, 1, n, f) == (size_t)n)
		*len = n;
	fclose(f);
	return buf;
}

/* realpath() or the input when it does not resolve, for comparisons. */
static void canon(const char *in, char *out)
{
	if (!realpath(in, out))
		snprintf(out, PATH_MAX, "%s", in);
}

/*
 * Run ldd with exactly the LD_* variables given in `env` ("" for none).
 * `paths` gets the realpaths of the objects in ldd's order, leaving out the
 * vdso and the interpreter (ldd prints that one where ld.so re-links it);
 * `missing` the names it reports "not found". Returns ldd's exit status.
 */
static int run_ldd(const char *exe, const char *env, struct list *paths, struct list *missing)
{
	char cmd[8192], line[4096], rp[PATH_MAX];
	FILE *p;
	int st;

	snprintf(cmd, sizeof(cmd), "env -u LD_LIBRARY_PATH -u LD_PRELOAD %s ldd '%s' 2>&1", env,
		 exe);
	p = popen(cmd, "r");
	if (!p)
		return -1;
	while (fgets(line, sizeof(line), p)) {
		char a[PATH_MAX], b[PATH_MAX], c[PATH_MAX];
		int n = sscanf(line, " %4095s %4095s %4095s", a, b, c);

		if (n >= 3 && strcmp(b, "=>") == 0) {
			if (strcmp(c, "not") == 0) {
				if (missing)
					list_add(missing, a);
				continue;
			}
			if (c[0] != '/')
				continue;
			if (strcmp(a, "libc.so.6") == 0)
				snprintf(libc_path, sizeof(libc_path), "%s", c);
			canon(c, rp);
		} else if ((n >= 1 && a[0] == '/') ||
			   (n >= 2 && b[0] == '(' && strncmp(a, "linux-vdso", 10) != 0)) {
			/* A path, or a name found in the current directory. */
			if (strstr(a, "/ld-linux-x86-64.so.2"))
				continue;
			canon(a, rp);
		} else {
			continue;
		}
		if (strstr(rp, "/ld-linux-x86-64.so.2"))
			continue;
		list_add(paths, rp);
	}
	st = pclose(p);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Our answer in the same shape as run_ldd()'s. */
static void ours_as_ldd(char **paths, size_t n, struct list *out)
{
	char rp[PATH_MAX];
	size_t i;

	for (i = 0; i < n; i++) {
		canon(paths[i], rp);
		if (strstr(rp, "/ld-linux-x86-64.so.2"))
			continue;
		list_add(out, rp);
	}
}

/* No two results may be the same file. */
static bool all_distinct_inodes(char **paths, size_t n)
{
	struct stat a, b;
	size_t i, j;

	for (i = 0; i < n; i++) {
		if (stat(paths[i], &a))
			return false;
		for (j = i + 1; j < n; j++)
			if (!stat(paths[j], &b) && a.st_dev == b.st_dev && a.st_ino == b.st_ino)
				return false;
	}
	return true;
}

/* Resolve with a clean environment unless `o` says otherwise. */
static int resolve(const char *exe, struct ld_opts *o, struct list *out, char *err, size_t errlen)
{
	char **paths;
	size_t n, i;
	int ret;

	if (!o->library_path)
		o->library_path = "";
	if (!o->preload)
		o->preload = "";
	if (!o->preload_file)
		o->preload_file = "";
	ret = ld_resolve_needed(exe, &paths, &n, o, err, errlen);
	if (ret)
		return ret;
	if (!all_distinct_inodes(paths, n)) {
		fprintf(stderr, "  duplicate inode in the result for %s\n", exe);
		ret = -EEXIST;
	}
	for (i = 0; i < n; i++)
		list_add(out, paths[i]);
	ld_paths_free(paths, n);
	return ret;
}

/* ------------------------------------------------------------------ */
/* fixtures                                                           */
/* ------------------------------------------------------------------ */

static const char probe_exe_c[] =
	"#include \"corobpf.h\"\n"
	"void extra_probes(void);\n"
	"int main(int argc, char **argv)\n"
	"{\n"
	"	(void)argv;\n"
	"	CORO_PROBE(create, 1, 0);\n"
	"	CORO_PROBE(switch, 0, 1, CORO_YIELD, 0);\n"
	"	CORO_PROBE(switch, 1, 0, CORO_WAIT, argc);\n"
	"	extra_probes();\n"
	"	return 0;\n"
	"}\n";

/*
 * Notes a scanner must sort out: a corobpf probe without semaphore, a probe
 * of another provider, and a note of another type with the stapsdt owner.
 * The corobpf note carries .stapsdt.base as the SDK writes it (libbpf moves
 * a site by the difference, and corobpf refuses a note without it).
 */
static const char extra_notes_s[] =
	"	.text\n"
	"	.globl extra_probes\n"
	"	.type extra_probes, @function\n"
	"extra_probes:\n"
	"90:	nop\n"
	"	ret\n"
	"	.ifndef _.stapsdt.base\n"
	"	.pushsection .stapsdt.base,\"aG\",\"progbits\",.stapsdt.base,comdat\n"
	"	.weak _.stapsdt.base\n"
	"	.hidden _.stapsdt.base\n"
	"_.stapsdt.base: .space 1\n"
	"	.size _.stapsdt.base, 1\n"
	"	.popsection\n"
	"	.endif\n"
	"	.section .note.stapsdt,\"\",@note\n"
	"	.balign 4\n"
	"	.4byte 8, 92f-91f, 3\n"
	"	.asciz \"stapsdt\"\n"
	"91:	.8byte 90b, _.stapsdt.base, 0\n"
	"	.asciz \"corobpf\"\n"
	"	.asciz \"ready\"\n"
	"	.asciz \"8@%rdi\"\n"
	"92:	.balign 4\n"
	"	.4byte 8, 94f-93f, 3\n"
	"	.asciz \"stapsdt\"\n"
	"93:	.8byte 90b, 0, 0x1234\n"
	"	.asciz \"other\"\n"
	"	.asciz \"switch\"\n"
	"	.asciz \"\"\n"
	"94:	.balign 4\n"
	"	.4byte 8, 4, 7\n"
	"	.asciz \"stapsdt\"\n"
	"	.4byte 0\n"
	"	.section .note.GNU-stack,\"\",@progbits\n";

static const char probe_lib_c[] =
	"#include \"corobpf.h\"\n"
	"void lib_exit(long id) { CORO_PROBE(exit, id, 0); }\n"
	"void lib_span(const char *s) { CORO_PROBE(span_begin, s); CORO_PROBE(span_end, s); }\n";

static const char plain_c[] = "int main(void) { return 0; }\n";

/*
 * Where the refusal tests move sites and semaphores: an instruction that is
 * not a nop (48 89 c7, mov %rax,%rdi), a five-byte nop without the steps
 * COROBPF_NOP5 puts around it, a constant in .rodata, words in .bss and
 * .data.
 */
static const char refuse_c[] =
	"#include \"corobpf.h\"\n"
	"const unsigned short ro_const = 1;\n"
	"unsigned short bss_word;\n"
	"unsigned short data_word = 7;\n"
	"__asm__(\".text\\n\"\n"
	"	\".globl mov_site\\n.type mov_site,@function\\n\"\n"
	"	\"mov_site: movq %rax, %rdi\\n nop\\n ret\\n\"\n"
	"	\".globl bare_nop5\\n.type bare_nop5,@function\\n\"\n"
	"	\"bare_nop5: .byte 0x0f, 0x1f, 0x44, 0x00, 0x00\\n ret\\n\"\n"
	"	\".globl imm90_fn\\n.type imm90_fn,@function\\n\"\n"
	"	\"imm90_fn: .cfi_startproc\\n xorl %eax, %eax\\n movl $0x90909090, %eax\\n nop\\n\"\n"
	"	\" ret\\n .cfi_endproc\\n\"\n"
	"	\".size imm90_fn, .-imm90_fn\\n\");\n"
	"int main(int argc, char **argv)\n"
	"{\n"
	"	(void)argv;\n"
	"	CORO_PROBE(create, argc, 0);\n"
	"	CORO_PROBE(switch, 0, 1, CORO_YIELD, 0);\n"
	"	CORO_PROBE(switch, 1, 0, CORO_WAIT, argc);\n"
	"	return ro_const + bss_word + data_word;\n"
	"}\n";

/*
 * An object with as many notes as a hostile file may carry: MANY_NOTES
 * sites of corobpf:bulk and one each of MANY_NAMES more names, all at
 * symbol SITE (-DSITE=...), and 5,000 notes of another provider.
 */
#define MANY_NOTES 50000
#define MANY_NAMES 100
static const char many_s[] =
	"	.text\n"
	"	.globl good_site, bad_site\n"
	"good_site: nop\n"
	"	ret\n"
	"bad_site: movq %rax, %rdi\n"
	"	ret\n"
	"	.ifndef _.stapsdt.base\n"
	"	.pushsection .stapsdt.base,\"aG\",\"progbits\",.stapsdt.base,comdat\n"
	"	.weak _.stapsdt.base\n"
	"	.hidden _.stapsdt.base\n"
	"_.stapsdt.base: .space 1\n"
	"	.size _.stapsdt.base, 1\n"
	"	.popsection\n"
	"	.endif\n"
	"	.macro note provider, name\n"
	"	.pushsection .note.stapsdt,\"\",\"note\"\n"
	"	.balign 4\n"
	"	.4byte 8, 2f-1f, 3\n"
	"	.asciz \"stapsdt\"\n"
	"1:	.8byte SITE, _.stapsdt.base, 0\n"
	"	.asciz \"\\provider\"\n"
	"	.asciz \"\\name\"\n"
	"	.asciz \"8@%rdi\"\n"
	"2:	.balign 4\n"
	"	.popsection\n"
	"	.endm\n"
	"	.macro numbered\n"
	"	note corobpf, n\\@\n"
	"	.endm\n"
	"	.rept 50000\n"
	"	note corobpf, bulk\n"
	"	.endr\n"
	"	.rept 5000\n"
	"	note other, bulk\n"
	"	.endr\n"
	"	.rept 100\n"
	"	numbered\n"
	"	.endr\n"
	"	.section .note.GNU-stack,\"\",@progbits\n";

static void put(const char *rel, const char *text)
{
	write_file(tpath(rel), text, strlen(text));
}

#define CC "cc -O2 -w"

/* Flip bytes of a copy of `from`: the classic ways to make an ELF wrong. */
static void patch_copy(const char *from, const char *to, size_t off, const void *bytes,
		       size_t len)
{
	size_t n;
	char *d = read_file(from, &n);

	if (d && off + len <= n)
		memcpy(d + off, bytes, len);
	write_file(to, d, n);
	free(d);
}

/*
 * Give executable `path` a DT_RUNPATH next to its DT_RPATH, pointing `skip`
 * bytes into the DT_RPATH string. GNU ld, gold and lld never write both, but
 * older linkers did and ld.so has a rule for it; the DT_DEBUG slot of an
 * executable is free to take the new entry.
 */
static int add_runpath_into_rpath(const char *path, size_t skip)
{
	Elf_Scn *scn = NULL;
	int fd, ret = -1;
	Elf *elf;

	elf_version(EV_CURRENT);
	fd = open(path, O_RDWR);
	if (fd < 0)
		return -1;
	elf = elf_begin(fd, ELF_C_READ, NULL);
	while (elf && (scn = elf_nextscn(elf, scn))) {
		long rpath = -1, debug = -1, i;
		Elf_Data *data;
		GElf_Shdr sh;
		GElf_Dyn dyn;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_DYNAMIC)
			continue;
		data = elf_getdata(scn, NULL);
		for (i = 0; data && gelf_getdyn(data, i, &dyn); i++) {
			if (dyn.d_tag == DT_RPATH)
				rpath = dyn.d_un.d_val;
			else if (dyn.d_tag == DT_DEBUG)
				debug = i;
		}
		if (rpath >= 0 && debug >= 0) {
			Elf64_Dyn nd = { .d_tag = DT_RUNPATH, .d_un.d_val = rpath + skip };

			if (pwrite(fd, &nd, sizeof(nd), sh.sh_offset + debug * sizeof(nd)) ==
			    sizeof(nd))
				ret = 0;
		}
		break;
	}
	elf_end(elf);
	close(fd);
	return ret;
}

/* File offset of the first stapsdt note header (namesz 8, type 3, "stapsdt"). */
static long first_stapsdt_note(const char *buf, size_t len)
{
	size_t i;

	for (i = 12; i + 8 <= len; i++) {
		uint32_t namesz, type;

		if (memcmp(buf + i, "stapsdt", 8) != 0)
			continue;
		memcpy(&namesz, buf + i - 12, 4);
		memcpy(&type, buf + i - 4, 4);
		if (namesz == 8 && type == 3)
			return i - 12;
	}
	return -1;
}

/* Files that are not what their names promise. */
static void make_bad_files(void)
{
	uint8_t cls = ELFCLASS32;
	uint16_t mach = EM_AARCH64;
	size_t len;
	char *buf;

	/* Longer than an ELF header, or ld.so would call it "file too short". */
	put("text.so", "/* GNU ld script */\n"
		       "this is not an ELF file, it is a linker script that ld.so cannot load\n");
	patch_copy(tpath("probe_exe"), tpath("as32"), EI_CLASS, &cls, 1);
	patch_copy(tpath("probe_exe"), tpath("asarm"), offsetof(Elf64_Ehdr, e_machine), &mach, 2);
	buf = read_file(tpath("probe_exe"), &len);
	if (buf)
		write_file(tpath("short40"), buf, 40);
	free(buf);
}

/*
 * The library tree:
 *   app           RUNPATH $ORIGIN/lib, needs libA.so
 *   lib/libA.so   needs libB.so, no search path of its own
 *   llp/libB.so   to be found through LD_LIBRARY_PATH only
 * and, for RPATH against RUNPATH,
 *   rp/libP.so    needs libQ.so;  llp2/libP.so another libP;  q/libQ.so
 *   app_rpath     DT_RPATH  rp:q     app_runpath   DT_RUNPATH rp:q
 */
static int build_fixtures(void)
{
	const char *usdt = srcdir;
	int bad = 0;

	bad |= sh("mkdir -p %s/lib %s/llp %s/rp %s/llp2 %s/q %s/lib/x86_64-linux-gnu %s/link "
		  "%s/bad32 %s/badm %s/badtxt %s/abs",
		  tmp, tmp, tmp, tmp, tmp, tmp, tmp, tmp, tmp, tmp, tmp);
	put("probe_exe.c", probe_exe_c);
	put("extra_notes.S", extra_notes_s);
	put("probe_lib.c", probe_lib_c);
	put("plain.c", plain_c);
	put("refuse.c", refuse_c);
	put("many.S", many_s);
	put("a.c", "int b(void); int a(void) { return b(); }\n");
	put("b.c", "int b(void) { return 2; }\n");
	put("main_a.c", "int a(void); int main(void) { return a() != 2; }\n");
	put("p.c", "int q(void); int p(void) { return q(); }\n");
	put("q.c", "int q(void) { return 5; }\n");
	put("main_p.c", "int p(void); int main(void) { return p() != 5; }\n");
	put("s.c", "int s(void) { return 7; }\n");
	put("main_s.c", "int s(void); int main(void) { return s() != 7; }\n");

	bad |= sh("cd %s && " CC " -I'%s/usdt' probe_exe.c extra_notes.S -o probe_exe && "
		  CC " -no-pie -I'%s/usdt' probe_exe.c extra_notes.S -o probe_exe_nopie && "
		  CC " -I'%s/usdt' -c probe_exe.c -o probe_exe.o && "
		  CC " -shared -fPIC -I'%s/usdt' probe_lib.c -o probe_lib.so && "
		  CC " -DCOROBPF_NOP5 -I'%s/usdt' probe_exe.c -c -o probe_exe_nop5.o && "
		  CC " -DCOROBPF_NOP5 -I'%s/usdt' probe_exe.c extra_notes.S -o probe_exe_nop5 && "
		  CC " -DCOROBPF_NOP5 -shared -fPIC -I'%s/usdt' probe_lib.c -o probe_lib_nop5.so && "
		  CC " plain.c -o plain && " CC " -static plain.c -o plain_static",
		  tmp, usdt, usdt, usdt, usdt, usdt, usdt, usdt);
	bad |= sh("cd %s && " CC " -I'%s/usdt' refuse.c -o refuse_exe && "
		  CC " -DSITE=good_site plain.c many.S -o many_good && "
		  CC " -DSITE=bad_site plain.c many.S -o many_bad",
		  tmp, usdt);
	bad |= sh("cd %s && "
		  CC " -shared -fPIC -Wl,-soname,libB.so b.c -o llp/libB.so && "
		  CC " -shared -fPIC -Wl,-soname,libA.so -Wl,--no-as-needed a.c -Lllp -lB "
		  "-o lib/libA.so && "
		  CC " main_a.c -Wl,--no-as-needed -Llib -lA -Wl,-rpath-link,llp "
		  "-Wl,--enable-new-dtags -Wl,-rpath,'$ORIGIN/lib' -o app && "
		  "cp lib/libA.so lib/x86_64-linux-gnu/libA.so && "
		  CC " main_a.c -Wl,--no-as-needed -Llib -lA -Wl,-rpath-link,llp "
		  "-Wl,--enable-new-dtags -Wl,-rpath,'${ORIGIN}/$LIB' -o app_lib && "
		  "ln -sf ../app link/app",
		  tmp);
	bad |= sh("cd %s && "
		  CC " -shared -fPIC -Wl,-soname,libQ.so q.c -o q/libQ.so && "
		  CC " -shared -fPIC -Wl,-soname,libP.so -Wl,--no-as-needed p.c -Lq -lQ "
		  "-o rp/libP.so && "
		  "cp rp/libP.so llp2/libP.so && "
		  CC " main_p.c -Wl,--no-as-needed -Lrp -lP -Wl,-rpath-link,q "
		  "-Wl,--disable-new-dtags -Wl,-rpath,%s/rp:%s/q -o app_rpath && "
		  CC " main_p.c -Wl,--no-as-needed -Lrp -lP -Wl,-rpath-link,q "
		  "-Wl,--enable-new-dtags -Wl,-rpath,%s/rp:%s/q -o app_runpath",
		  tmp, tmp, tmp, tmp, tmp);
	/* libP with a DT_RUNPATH of its own, under an executable with DT_RPATH. */
	bad |= sh("cd %s && mkdir -p rp2 && "
		  CC " -shared -fPIC -Wl,-soname,libP.so -Wl,--no-as-needed p.c -Lq -lQ "
		  "-Wl,--enable-new-dtags -Wl,-rpath,/nonexistent-corobpf -o rp2/libP.so && "
		  CC " main_p.c -Wl,--no-as-needed -Lrp2 -lP -Wl,-rpath-link,q "
		  "-Wl,--disable-new-dtags -Wl,-rpath,%s/rp2:%s/q -o app_rpath2",
		  tmp, tmp, tmp);
	/* DT_RPATH "q:rp" and, patched in, DT_RUNPATH "rp". */
	bad |= sh("cd %s && " CC " main_p.c -Wl,--no-as-needed -Lrp -lP -Wl,-rpath-link,q "
		  "-Wl,--disable-new-dtags -Wl,-rpath,%s/q:%s/rp -o app_both",
		  tmp, tmp, tmp);
	if (!bad && add_runpath_into_rpath(tpath("app_both"), strlen(tmp) + strlen("/q:"))) {
		fprintf(stderr, "cannot add a DT_RUNPATH to %s\n", tpath("app_both"));
		bad = 1;
	}
	/* DF_1_NODEFLIB: neither the system directories nor their cache entries. */
	bad |= sh("cd %s && " CC " plain.c -Wl,-z,nodefaultlib -o app_nodeflib", tmp);
	/* Another libB (soname libB.so) than the one in llp/. */
	bad |= sh("cd %s && mkdir -p other && cp llp/libB.so other/libB.so", tmp);
	/* The same libB in hwcap subdirectories and in their parents. */
	bad |= sh("cd %s && mkdir -p llph/glibc-hwcaps/x86-64-v2 llpl/x86_64 llpl/tls && "
		  "cp llp/libB.so llph/libB.so && cp llp/libB.so llph/glibc-hwcaps/x86-64-v2/ && "
		  "cp llp/libB.so llpl/libB.so && cp llp/libB.so llpl/x86_64/ && "
		  "cp llp/libB.so llpl/tls/",
		  tmp);
	/* A DT_NEEDED with a slash: a library without soname linked by path. */
	bad |= sh("cd %s && " CC " -shared -fPIC s.c -o abs/libS.so && "
		  CC " main_s.c -Wl,--no-as-needed %s/abs/libS.so -o app_abs",
		  tmp, tmp);
	if (!bad)
		make_bad_files();
	return bad;
}

/* ------------------------------------------------------------------ */
/* elfnotes                                                           */
/* ------------------------------------------------------------------ */

static void check_exe_probes(const char *path, int want_type)
{
	const struct elf_probe_name *sw, *cr, *rd;
	struct elf_probes p;
	char err[512] = "";
	int ret;

	ret = elf_probe_scan(path, "corobpf", &p, err, sizeof(err));
	CHECK_EQ(ret, 0);
	if (ret)
		fprintf(stderr, "  %s\n", err);
	CHECK_EQ(p.elf_type, want_type);
	CHECK_EQ(p.total, 5); /* with the batched path's `batch` site */
	CHECK_EQ(p.n_names, 4);
	CHECK_EQ(p.names_dropped, 0);
	sw = elf_probes_find(&p, "switch");
	cr = elf_probes_find(&p, "create");
	rd = elf_probes_find(&p, "ready");
	CHECK(sw && cr && rd);
	if (!sw || !cr || !rd)
		return;
	CHECK_EQ(sw->count, 2);
	CHECK(sw->has_semaphore);
	CHECK_EQ(cr->count, 1);
	CHECK(cr->has_semaphore);
	CHECK_EQ(rd->count, 1);
	CHECK(!rd->has_semaphore);
	CHECK(!elf_probes_find(&p, "exit"));
}

TEST(probes_executable)
{
	struct elf_probes p;
	char err[512];

	check_exe_probes(tpath("probe_exe"), ET_DYN);		/* PIE, Debian's default */
	check_exe_probes(tpath("probe_exe_nopie"), ET_EXEC);

	/* The other provider's note is there, and only it counts for "other". */
	CHECK_EQ(elf_probe_scan(tpath("probe_exe"), "other", &p, err, sizeof(err)), 0);
	CHECK_EQ(p.total, 1);
	CHECK_EQ(p.n_names, 1);
	CHECK_STR(p.names[0].name, "switch");
	CHECK(p.names[0].has_semaphore);

	/* NULL provider means corobpf. */
	CHECK_EQ(elf_probe_scan(tpath("probe_exe"), NULL, &p, err, sizeof(err)), 0);
	CHECK_EQ(p.total, 5);
}

TEST(probes_site_kinds)
{
	struct elf_probes p;
	char err[512];

	/* The default site is a one-byte nop; COROBPF_NOP5 makes it a five-byte one. */
	CHECK_EQ(elf_probe_scan(tpath("probe_exe"), "corobpf", &p, err, sizeof(err)), 0);
	CHECK_EQ(p.sites_nop1, p.total);
	CHECK_EQ(p.sites_nop5, 0);
	CHECK_EQ(elf_probe_scan(tpath("probe_exe_nopie"), "corobpf", &p, err, sizeof(err)), 0);
	CHECK_EQ(p.sites_nop1, p.total);
	CHECK_EQ(elf_probe_scan(tpath("probe_exe_nop5"), "corobpf", &p, err, sizeof(err)), 0);
	/* Four sites from the header (`batch` included), and the hand-written one-byte nop of extra_notes.S. */
	CHECK_EQ(p.total, 5);
	CHECK_EQ(p.sites_nop5, 4);
	CHECK_EQ(p.sites_nop1, 1);
	CHECK_EQ(p.sites_other, 0);
	CHECK_EQ(elf_probe_scan(tpath("probe_lib_nop5.so"), "corobpf", &p, err, sizeof(err)), 0);
	CHECK_EQ(p.sites_nop5, 4);
	/* An object file's sites are not in any loaded segment: neither kind. */
	CHECK_EQ(elf_probe_scan(tpath("probe_exe_nop5.o"), "corobpf", &p, err, sizeof(err)), 0);
	CHECK_EQ(p.sites_other, p.total);
}

/* Where each site will be probed: the bytes at its file offset, first one or five. */
struct site_bytes {
	const char *path;
	unsigned int n, nop1, lea;
};

static void site_bytes_fn(void *ctx, const struct elf_probe_site *site)
{
	static const unsigned char lea[5] = {0x48, 0x8d, 0x64, 0x24, 0x80};
	struct site_bytes *sb = ctx;
	unsigned char b[10];
	int fd = open(sb->path, O_RDONLY | O_CLOEXEC);

	sb->n++;
	if (fd < 0 || pread(fd, b, sizeof(b), (off_t)site->off) != (ssize_t)sizeof(b)) {
		if (fd >= 0)
			close(fd);
		return;
	}
	close(fd);
	if (b[0] == 0x90)
		sb->nop1++;
	/* The stack step, and the five-byte nop right after it. */
	if (!memcmp(b, lea, sizeof(lea)) && b[5] == 0x0f && b[6] == 0x1f && b[7] == 0x44)
		sb->lea++;
}

TEST(probes_five_byte_sites_are_probed_at_the_step_before)
{
	struct site_bytes sb = {.path = tpath("probe_exe_nop5")};
	struct elf_probes p;
	char err[512];

	/*
	 * A uprobe on the nop itself becomes a call a forked child cannot follow (elfnotes.c):
	 * each five-byte site is probed at its `lea -128(%rsp),%rsp`; one-byte ones at the nop.
	 */
	CHECK_EQ(elf_probe_walk(sb.path, "corobpf", site_bytes_fn, &sb, &p, err, sizeof(err)), 0);
	CHECK_EQ(sb.n, 5);
	CHECK_EQ(sb.lea, 4);
	CHECK_EQ(sb.nop1, 1);
	sb = (struct site_bytes){.path = tpath("probe_exe")};
	CHECK_EQ(elf_probe_walk(sb.path, "corobpf", site_bytes_fn, &sb, &p, err, sizeof(err)), 0);
	CHECK_EQ(sb.nop1, sb.n);
	CHECK_EQ(sb.lea, 0);
}

TEST(probes_object_file)
{
	struct elf_probes p;
	char err[512];

	/* Before linking the C part alone: 4 sites (`batch` included), ET_REL. */
	CHECK_EQ(elf_probe_scan(tpath("probe_exe.o"), "corobpf", &p, err, sizeof(err)), 0);
	CHECK_EQ(p.elf_type, ET_REL);
	CHECK_EQ(p.total, 4);
	CHECK_EQ(p.n_names, 3);
}

TEST(probes_shared_library)
{
	const struct elf_probe_name *e, *sb, *se;
	struct elf_probes p;
	char err[512];

	CHECK_EQ(elf_probe_scan(tpath("probe_lib.so"), "corobpf", &p, err, sizeof(err)), 0);
	CHECK_EQ(p.elf_type, ET_DYN);
	CHECK_EQ(p.total, 4);
	CHECK_EQ(p.n_names, 4);
	e = elf_probes_find(&p, "exit");
	sb = elf_probes_find(&p, "span_begin");
	se = elf_probes_find(&p, "span_end");
	CHECK(e && sb && se);
	if (e && sb && se) {
		CHECK_EQ(e->count, 1);
		CHECK_EQ(sb->count, 1);
		CHECK_EQ(se->count, 1);
		CHECK(e->has_semaphore && sb->has_semaphore && se->has_semaphore);
	}
}

TEST(probes_none)
{
	struct elf_probes p;
	char err[512];

	CHECK_EQ(elf_probe_scan(tpath("plain"), "corobpf", &p, err, sizeof(err)), 0);
	CHECK_EQ(p.elf_type, ET_DYN);
	CHECK_EQ(p.total, 0);
	CHECK_EQ(p.n_names, 0);
	CHECK_EQ(elf_probe_scan(libc_path, "corobpf", &p, err, sizeof(err)), 0);
	CHECK_EQ(p.elf_type, ET_DYN);
	CHECK_EQ(p.total, 0);
}

TEST(probes_malformed_notes)
{
	char err[512], want[64], *buf;
	struct elf_probes p;
	size_t len, i;
	uint32_t v;
	long off;
	int ret;

	buf = read_file(tpath("probe_exe"), &len);
	CHECK(buf != NULL);
	if (!buf)
		return;
	off = first_stapsdt_note(buf, len);
	CHECK(off > 0);
	if (off <= 0) {
		free(buf);
		return;
	}
	snprintf(want, sizeof(want), "0x%lx", off);

	/* A descriptor that runs past the section. */
	v = 0x7fffffff;
	patch_copy(tpath("probe_exe"), tpath("bad_descsz"), off + 4, &v, 4);
	err[0] = '\0';
	ret = elf_probe_scan(tpath("bad_descsz"), "corobpf", &p, err, sizeof(err));
	CHECK_EQ(ret, -EINVAL);
	CHECK_CONTAINS(err, want);
	CHECK_CONTAINS(err, tpath("bad_descsz"));

	/* A descriptor too short for the three addresses and strings. */
	v = 20;
	patch_copy(tpath("probe_exe"), tpath("short_desc"), off + 4, &v, 4);
	err[0] = '\0';
	CHECK_EQ(elf_probe_scan(tpath("short_desc"), "corobpf", &p, err, sizeof(err)), -EINVAL);
	CHECK_CONTAINS(err, want);

	/* An owner name that runs past the section. */
	v = 0x7ffffff0;
	patch_copy(tpath("probe_exe"), tpath("bad_namesz"), off, &v, 4);
	err[0] = '\0';
	CHECK_EQ(elf_probe_scan(tpath("bad_namesz"), "corobpf", &p, err, sizeof(err)), -EINVAL);
	CHECK_CONTAINS(err, want);

	/* Strings without their terminating NULs. */
	memcpy(&v, buf + off + 4, 4);
	for (i = off + 20 + 24; i < (size_t)off + 20 + v; i++)
		buf[i] = 'A';
	write_file(tpath("unterminated"), buf, len);
	err[0] = '\0';
	CHECK_EQ(elf_probe_scan(tpath("unterminated"), "corobpf", &p, err, sizeof(err)), -EINVAL);
	CHECK_CONTAINS(err, "NUL-terminated");
	CHECK_CONTAINS(err, want);
	free(buf);
}

/* ---- what corobpf refuses to probe ---- */

static Elf *open_elf(const char *path, int *fd)
{
	elf_version(EV_CURRENT);
	*fd = open(path, O_RDONLY);
	if (*fd < 0)
		return NULL;
	return elf_begin(*fd, ELF_C_READ, NULL);
}

static void close_elf(Elf *elf, int fd)
{
	elf_end(elf);
	if (fd >= 0)
		close(fd);
}

/* The section named `name`: its header and its index, or -1. */
static long find_section(Elf *elf, const char *name, GElf_Shdr *sh)
{
	Elf_Scn *scn = NULL;
	size_t shstrndx;

	if (!elf || elf_getshdrstrndx(elf, &shstrndx))
		return -1;
	while ((scn = elf_nextscn(elf, scn))) {
		const char *n;

		if (!gelf_getshdr(scn, sh))
			return -1;
		n = elf_strptr(elf, shstrndx, sh->sh_name);
		if (n && !strcmp(n, name))
			return (long)elf_ndxscn(scn);
	}
	return -1;
}

/* The address of symbol `name` in the .symtab of `path`, or 0. */
static uint64_t sym_addr(const char *path, const char *name)
{
	uint64_t addr = 0;
	Elf_Data *data;
	GElf_Shdr sh;
	GElf_Sym sym;
	int fd, i;
	Elf *elf = open_elf(path, &fd);
	long ndx = find_section(elf, ".symtab", &sh);

	if (ndx < 0) {
		close_elf(elf, fd);
		return 0;
	}
	data = elf_getdata(elf_getscn(elf, ndx), NULL);
	for (i = 0; data && gelf_getsym(data, i, &sym); i++) {
		const char *n = elf_strptr(elf, sh.sh_link, sym.st_name);

		if (n && !strcmp(n, name)) {
			addr = sym.st_value;
			break;
		}
	}
	close_elf(elf, fd);
	return addr;
}

/* File offset of the descriptor (pc, base, semaphore, strings) of note `nth` of corobpf:name. */
static long note_desc(const char *path, const char *name, int nth)
{
	size_t off = 0, name_off, desc_off;
	long ret = -1;
	Elf_Data *data;
	GElf_Nhdr nh;
	GElf_Shdr sh;
	int fd;
	Elf *elf = open_elf(path, &fd);
	long ndx = find_section(elf, ".note.stapsdt", &sh);

	data = ndx < 0 ? NULL : elf_getdata(elf_getscn(elf, ndx), NULL);
	while (data && (off = gelf_getnote(data, off, &nh, &name_off, &desc_off)) > 0) {
		const char *d = (const char *)data->d_buf + desc_off;

		if (nh.n_type == 3 && !strcmp(d + 24, "corobpf") &&
		    !strcmp(d + 24 + strlen("corobpf") + 1, name) && nth-- == 0) {
			ret = (long)(sh.sh_offset + desc_off);
			break;
		}
	}
	close_elf(elf, fd);
	return ret;
}

/* A copy of `from` with the 8 bytes at `off` set to v. */
static void patch_u64(const char *from, const char *to, long off, uint64_t v)
{
	CHECK(off > 0);
	patch_copy(from, to, off, &v, 8);
}

static uint64_t file_u64(const char *path, long off)
{
	uint64_t v = 0;
	int fd = open(path, O_RDONLY);

	if (fd < 0 || pread(fd, &v, 8, off) != 8)
		fprintf(stderr, "cannot read %s at %ld\n", path, off);
	if (fd >= 0)
		close(fd);
	return v;
}

/* Scan `rel` and expect one refused site, with every piece of `want` in the reason. */
static void check_refused(const char *rel, unsigned int n_refused, const char *const *want)
{
	struct elf_probes p;
	char err[512] = "";
	int ret = elf_probe_scan(tpath(rel), "corobpf", &p, err, sizeof(err));

	CHECK_EQ(ret, 0);
	if (ret) {
		fprintf(stderr, "  %s: %s\n", rel, err);
		return;
	}
	CHECK_EQ(p.sites_refused, n_refused);
	CHECK_EQ(p.sites_nop1 + p.sites_nop5 + p.sites_other, p.total);
	for (; *want; want++)
		CHECK_CONTAINS(p.refused, *want);
}

#define REFUSED(rel, n, ...) check_refused(rel, n, (const char *const[]){ __VA_ARGS__, NULL })

TEST(probes_sdk_sites_accepted)
{
	static const char *const ok[] = { "probe_exe", "probe_exe_nopie", "probe_exe_nop5",
					  "probe_lib.so", "probe_lib_nop5.so", "refuse_exe" };
	struct elf_probes p;
	char err[512];

	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		CHECK_EQ(elf_probe_scan(tpath(ok[i]), "corobpf", &p, err, sizeof(err)), 0);
		CHECK(p.total > 0);
		CHECK_EQ(p.sites_refused, 0);
		CHECK_STR(p.refused, "");
		if (p.sites_refused)
			fprintf(stderr, "  %s: %s\n", ok[i], p.refused);
	}
	/* An object file is not mapped as it is: no site in it can be placed. */
	CHECK_EQ(elf_probe_scan(tpath("probe_exe.o"), "corobpf", &p, err, sizeof(err)), 0);
	CHECK_EQ(p.sites_refused, p.total);
	CHECK_CONTAINS(p.refused, "no program headers");
}

TEST(probes_refuse_sites)
{
	char exe[PATH_MAX], want[256];	/* exe: tpath() recycles its buffers */
	uint64_t mov, nop5, ro, base, imm;
	long create, sw;

	snprintf(exe, sizeof(exe), "%s", tpath("refuse_exe"));
	create = note_desc(exe, "create", 0);
	sw = note_desc(exe, "switch", 0);
	mov = sym_addr(exe, "mov_site");
	nop5 = sym_addr(exe, "bare_nop5");
	ro = sym_addr(exe, "ro_const");
	CHECK(create > 0 && sw > 0 && mov && nop5 && ro);
	/* The review's case: a site on the first byte of mov %rax,%rdi. */
	patch_u64(exe, tpath("r_mov"), create, mov);
	snprintf(want, sizeof(want), "site 1 of corobpf:create at 0x%llx is not a nop",
		 (unsigned long long)mov);
	REFUSED("r_mov", 1, want, "(bytes 48 89 c7 90 c3)", "not an instruction our SDK emits");
	/* Into the middle of it. */
	patch_u64(exe, tpath("r_mid"), create, mov + 1);
	REFUSED("r_mid", 1, "is not a nop (bytes 89 c7 90 c3");
	/* A five-byte nop alone: an optimized uprobe's call would write below the stack pointer. */
	patch_u64(exe, tpath("r_nop5"), create, nop5);
	REFUSED("r_nop5", 1, "is a five-byte nop without the stack-pointer steps");
	/* Data, and no segment at all. */
	patch_u64(exe, tpath("r_data"), create, ro);
	REFUSED("r_data", 1, "is in a segment that is not executable");
	patch_u64(exe, tpath("r_nowhere"), create, 0x7fff0000);
	REFUSED("r_nowhere", 1, "site 1 of corobpf:create at 0x7fff0000 is in no loaded segment");
	/* A note whose .stapsdt.base is not the object's: libbpf would move the site. */
	base = file_u64(exe, create + 8);
	patch_u64(exe, tpath("r_base"), create + 8, base + 0x10);
	snprintf(want, sizeof(want), "but the object has it at 0x%llx",
		 (unsigned long long)base);
	REFUSED("r_base", 1, want, "changed after linking");
	/*
	 * A 90 byte inside another instruction: the immediate of movl $0x90909090, %eax, 3 bytes
	 * into imm90_fn (after a two-byte xorl). The bytes pass; decoding imm90_fn from its start
	 * does not. The nop after it is a boundary and passes.
	 */
	imm = sym_addr(exe, "imm90_fn");
	CHECK(imm);
	patch_u64(exe, tpath("r_imm90"), create, imm + 3);
	snprintf(want, sizeof(want), "site 1 of corobpf:create at 0x%llx is inside the instruction "
		 "at 0x%llx (bytes b8 90 90 90 90) of function imm90_fn, decoded from its start at "
		 "0x%llx", (unsigned long long)(imm + 3), (unsigned long long)(imm + 2),
		 (unsigned long long)imm);
	REFUSED("r_imm90", 1, want, "not an instruction boundary");
	/* Stripped of its symbols: its unwind entry gives the function's start. */
	CHECK_EQ(sh("cd %s && strip -s -o r_imm90_stripped r_imm90", tmp), 0);
	REFUSED("r_imm90_stripped", 1, "is inside the instruction", "of the function of its unwind "
		"entry, decoded from its start at");
	patch_u64(exe, tpath("r_imm90_nop"), create, imm + 7);
	check_refused("r_imm90_nop", 0, (const char *const[]){ NULL });
	/* Two bad sites: both counted, the first in the file named. */
	patch_u64(tpath("r_mov"), tpath("r_two"), sw, mov + 1);
	REFUSED("r_two", 2, "site 1 of corobpf:create");
}

TEST(probes_refuse_semaphores)
{
	char exe[PATH_MAX], want[128];
	long create;
	uint64_t sem;
	GElf_Shdr sh;
	long ndx;
	int fd;
	Elf *elf;

	snprintf(exe, sizeof(exe), "%s", tpath("refuse_exe"));
	create = note_desc(exe, "create", 0) + 16;
	sem = file_u64(exe, create);
	CHECK(create > 16 && sem);
	patch_u64(exe, tpath("s_ro"), create, sym_addr(exe, "ro_const"));
	snprintf(want, sizeof(want), "semaphore of corobpf:create at 0x%llx is outside .probes "
		 "(in .rodata)", (unsigned long long)sym_addr(exe, "ro_const"));
	REFUSED("s_ro", 1, want);
	patch_u64(exe, tpath("s_bss"), create, sym_addr(exe, "bss_word"));
	REFUSED("s_bss", 1, "is outside .probes (in .bss)");
	patch_u64(exe, tpath("s_data"), create, sym_addr(exe, "data_word"));
	REFUSED("s_data", 1, "is outside .probes (in .data)");
	patch_u64(exe, tpath("s_far"), create, 0x7fff0000);
	REFUSED("s_far", 1, "is outside .probes (in no section)");
	patch_u64(exe, tpath("s_odd"), create, sem + 1);
	REFUSED("s_odd", 1, "is not 2-byte aligned");

	/* .probes that says it is elsewhere in the file than its segment maps it. */
	elf = open_elf(exe, &fd);
	ndx = find_section(elf, ".probes", &sh);
	CHECK(ndx > 0);
	if (ndx > 0) {
		GElf_Ehdr eh;
		uint64_t moved = sh.sh_offset + 2;

		gelf_getehdr(elf, &eh);
		patch_u64(exe, tpath("s_offset"),
			  (long)(eh.e_shoff + ndx * sizeof(Elf64_Shdr) +
				 offsetof(Elf64_Shdr, sh_offset)), moved);
		/* Every semaphore is in .probes: every site is refused. */
		REFUSED("s_offset", 4, "by .probes: the kernel would increment other bytes");
	}
	close_elf(elf, fd);
}

TEST(probes_refuse_names_and_segments)
{
	char exe[PATH_MAX];
	long create;
	GElf_Phdr ph, prev = { 0 };
	size_t nph, i;
	int fd;
	Elf *elf;

	snprintf(exe, sizeof(exe), "%s", tpath("refuse_exe"));
	create = note_desc(exe, "create", 0);
	/* A name no CORO_PROBE() writes, quoted as it is (the log escapes it). */
	patch_copy(exe, tpath("n_esc"), create + 24 + 8, "\x1b[2J\\", 6);
	REFUSED("n_esc", 1, "site 1 of corobpf:\x1b[2J\\ at 0x", "is not a C identifier");

	/* Segments that overlap: an address no longer says which bytes libbpf probes. */
	elf = open_elf(exe, &fd);
	CHECK(elf && !elf_getphdrnum(elf, &nph));
	for (i = 0; elf && i < nph && gelf_getphdr(elf, (int)i, &ph); i++) {
		if (ph.p_type != PT_LOAD)
			continue;
		if (ph.p_flags & PF_X) {
			GElf_Ehdr eh;

			gelf_getehdr(elf, &eh);
			patch_u64(exe, tpath("g_overlap"),
				  (long)(eh.e_phoff + i * sizeof(Elf64_Phdr) +
					 offsetof(Elf64_Phdr, p_vaddr)), prev.p_vaddr);
			break;
		}
		prev = ph;
	}
	close_elf(elf, fd);
	REFUSED("g_overlap", 4, "cannot be placed: its PT_LOAD segments at 0x", "overlap");
}

/* Sizes a file cannot hold, or that only a sparse file declares: refused, never read. */
TEST(probes_declared_sizes)
{
	char exe[PATH_MAX], err[512];
	struct elf_probes p;
	struct stat st;
	GElf_Ehdr eh;
	GElf_Shdr sh;
	long ndx, size_at;
	int fd, ret;
	Elf *elf;

	snprintf(exe, sizeof(exe), "%s", tpath("probe_exe"));
	elf = open_elf(exe, &fd);
	ndx = find_section(elf, ".note.stapsdt", &sh);
	CHECK(ndx > 0 && gelf_getehdr(elf, &eh));
	close_elf(elf, fd);
	if (ndx <= 0 || stat(exe, &st))
		return;
	size_at = (long)(eh.e_shoff + ndx * sizeof(Elf64_Shdr) + offsetof(Elf64_Shdr, sh_size));

	/* Past the end of the file: named, with the section's index. */
	patch_u64(exe, tpath("d_past"), size_at, (uint64_t)st.st_size);
	ret = elf_probe_scan(tpath("d_past"), "corobpf", &p, err, sizeof(err));
	CHECK_EQ(ret, -EINVAL);
	CHECK_CONTAINS(err, "past the end of the");

	/* In the file, made that long by a hole: larger than corobpf reads of a section. */
	patch_u64(exe, tpath("d_sparse"), size_at, ELF_READ_MAX + 1);
	CHECK_EQ(truncate(tpath("d_sparse"), (off_t)(sh.sh_offset + ELF_READ_MAX + 1)), 0);
	ret = elf_probe_scan(tpath("d_sparse"), "corobpf", &p, err, sizeof(err));
	CHECK_EQ(ret, -EINVAL);
	CHECK_CONTAINS(err, "declares 67108865 bytes of notes, more than the 64 MiB");
	/* Exactly the limit is read (and its zeros after the notes are padding). */
	patch_u64(exe, tpath("d_limit"), size_at, ELF_READ_MAX);
	CHECK_EQ(truncate(tpath("d_limit"), (off_t)(sh.sh_offset + ELF_READ_MAX)), 0);
	ret = elf_probe_scan(tpath("d_limit"), "corobpf", &p, err, sizeof(err));
	CHECK(ret == 0 || !strstr(err, "more than the 64 MiB"));
	unlink(tpath("d_sparse"));
	unlink(tpath("d_limit"));
}

TEST(probes_hostile_many)
{
	struct elf_probes p;
	char err[512];

	/* Linear in the notes whatever they hold: this would not end if a step were quadratic. */
	CHECK_EQ(elf_probe_scan(tpath("many_good"), "corobpf", &p, err, sizeof(err)), 0);
	CHECK_EQ(p.total, MANY_NOTES + MANY_NAMES);
	CHECK_EQ(p.n_names, ELF_PROBE_NAMES_MAX);
	CHECK_EQ(p.names_dropped, MANY_NAMES + 1 - ELF_PROBE_NAMES_MAX);
	CHECK_EQ(p.sites_nop1, p.total);
	CHECK_EQ(p.sites_refused, 0);
	CHECK_EQ(elf_probe_scan(tpath("many_good"), "other", &p, err, sizeof(err)), 0);
	CHECK_EQ(p.total, 5000);

	CHECK_EQ(elf_probe_scan(tpath("many_bad"), "corobpf", &p, err, sizeof(err)), 0);
	CHECK_EQ(p.sites_refused, p.total);
	CHECK_EQ(p.sites_other, p.total);
	CHECK_CONTAINS(p.refused, "site 1 of corobpf:bulk at 0x");
	CHECK_CONTAINS(p.refused, "(bytes 48 89 c7 c3");
}

/*
 * Random damage to the notes, the program headers and the section headers of
 * a real object: never a crash or a read out of bounds (make asan-test runs
 * this under AddressSanitizer), and counts that add up.
 */
TEST(probes_random_damage)
{
	uint32_t seed = 0x2c0b0f;
	size_t len, i, regions[3][2];
	long notes;
	char *orig, *buf, err[512];
	GElf_Shdr sh;
	GElf_Ehdr eh;
	int fd, n_ok = 0;
	Elf *elf;

	orig = read_file(tpath("probe_exe"), &len);
	elf = open_elf(tpath("probe_exe"), &fd);
	notes = find_section(elf, ".note.stapsdt", &sh);
	CHECK(orig && notes > 0 && gelf_getehdr(elf, &eh));
	close_elf(elf, fd);
	if (!orig || notes <= 0) {
		free(orig);
		return;
	}
	regions[0][0] = sh.sh_offset;
	regions[0][1] = sh.sh_size;
	regions[1][0] = eh.e_phoff;
	regions[1][1] = (size_t)eh.e_phnum * sizeof(Elf64_Phdr);
	regions[2][0] = eh.e_shoff;
	regions[2][1] = (size_t)eh.e_shnum * sizeof(Elf64_Shdr);
	buf = malloc(len);
	for (i = 0; buf && i < 3000; i++) {
		struct elf_probes p;
		int flips, ret;

		memcpy(buf, orig, len);
		seed = seed * 1103515245 + 12345;
		flips = 1 + (seed >> 16) % 4;
		while (flips--) {
			size_t *r, at;

			seed = seed * 1103515245 + 12345;
			/* Mostly the notes, where a hostile file puts its numbers. */
			r = regions[(seed >> 16) % 5 < 3 ? 0 : 1 + (seed >> 20) % 2];
			seed = seed * 1103515245 + 12345;
			at = r[0] + (seed >> 8) % r[1];
			seed = seed * 1103515245 + 12345;
			buf[at] = (seed >> 24) % 3 ? (char)(seed >> 16) : (char)0xff;
		}
		write_file(tpath("damaged"), buf, len);
		ret = elf_probe_scan(tpath("damaged"), "corobpf", &p, err, sizeof(err));
		if (ret)
			continue;
		n_ok++;
		CHECK(p.sites_refused <= p.total);
		CHECK_EQ(p.sites_nop1 + p.sites_nop5 + p.sites_other, p.total);
	}
	CHECK(n_ok > 100);
	free(buf);
	free(orig);
}

TEST(not_elf_and_truncated)
{
	static const size_t cuts[] = { 0, 3, 16, 40, 64, 200, 4096 };
	struct elf_dyninfo di;
	struct elf_probes p;
	char err[512], name[64];
	size_t len, i;
	char *buf;
	int ret;

	err[0] = '\0';
	CHECK_EQ(elf_probe_scan(tpath("text.so"), "corobpf", &p, err, sizeof(err)), -ENOEXEC);
	CHECK_CONTAINS(err, "not an ELF file");
	CHECK_CONTAINS(err, tpath("text.so"));
	CHECK_EQ(elf_dynamic_info(tpath("text.so"), &di, err, sizeof(err)), -ENOEXEC);
	CHECK(!elf_is_elf(tpath("text.so")));
	CHECK(elf_is_elf(tpath("probe_exe")));
	CHECK(!elf_is_elf(tpath("does-not-exist")));

	err[0] = '\0';
	CHECK_EQ(elf_probe_scan(tpath("does-not-exist"), "corobpf", &p, err, sizeof(err)),
		 -ENOENT);
	CHECK_CONTAINS(err, "does-not-exist");

	/*
	 * Truncated copies: every cut must give an error, never a crash or a
	 * read out of bounds (valgrind watches), and never invented probes.
	 */
	buf = read_file(tpath("probe_exe"), &len);
	CHECK(buf && len > 8192);
	for (i = 0; buf && i < sizeof(cuts) / sizeof(cuts[0]) + 1; i++) {
		size_t cut = i < sizeof(cuts) / sizeof(cuts[0]) ? cuts[i] : len / 2;

		snprintf(name, sizeof(name), "trunc_%zu", cut);
		write_file(tpath(name), buf, cut);
		err[0] = '\0';
		ret = elf_probe_scan(tpath(name), "corobpf", &p, err, sizeof(err));
		CHECK(ret < 0);
		CHECK(err[0] != '\0');
		/* Program headers and PT_DYNAMIC are near the start: later cuts may keep them. */
		ret = elf_dynamic_info(tpath(name), &di, err, sizeof(err));
		if (cut <= 200)
			CHECK(ret < 0);
		if (!ret)
			elf_dyninfo_free(&di);
	}
	free(buf);
}

TEST(wrong_class_and_machine)
{
	struct elf_probes p;
	char err[512];
	int fd;

	err[0] = '\0';
	CHECK_EQ(elf_probe_scan(tpath("as32"), "corobpf", &p, err, sizeof(err)), -ENOEXEC);
	CHECK_CONTAINS(err, "32-bit");
	CHECK_CONTAINS(err, tpath("as32"));

	err[0] = '\0';
	CHECK_EQ(elf_probe_scan(tpath("asarm"), "corobpf", &p, err, sizeof(err)), -ENOEXEC);
	CHECK_CONTAINS(err, "aarch64");

	/* ld.so's classification: other class/machine is skipped, garbage is fatal. */
	fd = open(tpath("as32"), O_RDONLY);
	CHECK_EQ(elf_check_loadable(fd, err, sizeof(err)), ELF_LOAD_SKIP);
	close(fd);
	fd = open(tpath("asarm"), O_RDONLY);
	CHECK_EQ(elf_check_loadable(fd, err, sizeof(err)), ELF_LOAD_SKIP);
	close(fd);
	fd = open(tpath("text.so"), O_RDONLY);
	CHECK_EQ(elf_check_loadable(fd, err, sizeof(err)), -ENOEXEC);
	CHECK_STR(err, "invalid ELF header");
	close(fd);
	fd = open(tpath("short40"), O_RDONLY);
	CHECK_EQ(elf_check_loadable(fd, err, sizeof(err)), -ENOEXEC);
	CHECK_STR(err, "file too short");
	close(fd);
	fd = open(tpath("probe_exe.o"), O_RDONLY);
	CHECK_EQ(elf_check_loadable(fd, err, sizeof(err)), -ENOEXEC);
	CHECK_STR(err, "only ET_DYN and ET_EXEC can be loaded");
	close(fd);
	fd = open(tpath("probe_lib.so"), O_RDONLY);
	CHECK_EQ(elf_check_loadable(fd, err, sizeof(err)), 0);
	close(fd);
}

TEST(dynamic_info)
{
	struct elf_dyninfo di;
	char err[512];

	CHECK_EQ(elf_dynamic_info(tpath("app"), &di, err, sizeof(err)), 0);
	CHECK(!di.is_static);
	CHECK_EQ(di.elf_type, ET_DYN);
	CHECK_STR(di.interp, "/lib64/ld-linux-x86-64.so.2");
	CHECK_EQ(di.n_needed, 2);
	if (di.n_needed == 2) {
		CHECK_STR(di.needed[0], "libA.so");
		CHECK_STR(di.needed[1], "libc.so.6");
	}
	CHECK_STR(di.runpath, "$ORIGIN/lib");	/* raw, not expanded */
	CHECK(di.rpath == NULL);
	CHECK(di.soname == NULL);
	CHECK(di.flags_1 & DF_1_PIE);
	elf_dyninfo_free(&di);

	CHECK_EQ(elf_dynamic_info(tpath("app_rpath"), &di, err, sizeof(err)), 0);
	CHECK(di.runpath == NULL);
	CHECK(di.rpath && strstr(di.rpath, "/rp:"));
	elf_dyninfo_free(&di);

	CHECK_EQ(elf_dynamic_info(tpath("lib/libA.so"), &di, err, sizeof(err)), 0);
	CHECK_STR(di.soname, "libA.so");
	CHECK(di.interp == NULL);
	CHECK_EQ(di.n_needed, 2);
	if (di.n_needed >= 1)
		CHECK_STR(di.needed[0], "libB.so");
	elf_dyninfo_free(&di);

	CHECK_EQ(elf_dynamic_info(tpath("plain_static"), &di, err, sizeof(err)), 0);
	CHECK(di.is_static);
	CHECK(di.interp == NULL);
	CHECK_EQ(di.n_needed, 0);
	elf_dyninfo_free(&di);

	CHECK_EQ(elf_dynamic_info(libc_path, &di, err, sizeof(err)), 0);
	CHECK_STR(di.soname, "libc.so.6");
	CHECK(di.n_needed == 1 && strcmp(di.needed[0], "ld-linux-x86-64.so.2") == 0);
	elf_dyninfo_free(&di);
}

/* ------------------------------------------------------------------ */
/* ldpaths                                                            */
/* ------------------------------------------------------------------ */

TEST(ld_tree_runpath_origin_and_llp)
{
	struct ld_opts o = { .library_path = llp_dir };
	struct list got = { 0 }, want = { 0 }, ldd = { 0 }, ours = { 0 }, miss = { 0 };
	char err[512], env[PATH_MAX + 32];
	int ret;

	ret = resolve(tpath("app"), &o, &got, err, sizeof(err));
	CHECK_EQ(ret, 0);
	if (ret)
		fprintf(stderr, "  %s\n", err);
	/* Interpreter, the exe's DT_NEEDED in order, then theirs. */
	list_add(&want, "/lib64/ld-linux-x86-64.so.2");
	list_add(&want, tpath("lib/libA.so"));
	list_add(&want, libc_path);
	list_add(&want, tpath("llp/libB.so"));
	CHECK(list_eq(&got, &want));
	if (!list_eq(&got, &want)) {
		list_print("got", &got);
		list_print("want", &want);
	}
	CHECK_EQ(o.n_missing, 0);
	CHECK_STR(o.cache_error, "");

	/* And the loader agrees, order included. */
	snprintf(env, sizeof(env), "LD_LIBRARY_PATH=%s", tpath("llp"));
	CHECK_EQ(run_ldd(tpath("app"), env, &ldd, &miss), 0);
	ours_as_ldd(got.v, got.n, &ours);
	CHECK(list_eq(&ours, &ldd));
	CHECK_EQ(miss.n, 0);
	list_free(&got);
	list_free(&want);
	list_free(&ldd);
	list_free(&ours);
	list_free(&miss);
	ld_opts_release(&o);
}

TEST(ld_missing_library)
{
	struct ld_opts o = { 0 };
	struct list got = { 0 }, ldd = { 0 }, miss = { 0 };
	char err[512], **paths;
	size_t n;
	int ret;

	/* Without LD_LIBRARY_PATH libB cannot be found: not an error, a report. */
	ret = resolve(tpath("app"), &o, &got, err, sizeof(err));
	CHECK_EQ(ret, 0);
	CHECK_EQ(got.n, 3);
	CHECK(!list_has(&got, tpath("llp/libB.so")));
	CHECK_EQ(o.n_missing, 1);
	if (o.n_missing == 1) {
		CHECK_STR(o.missing[0].name, "libB.so");
		CHECK_STR(o.missing[0].needed_by, tpath("lib/libA.so"));
		CHECK_STR(o.missing[0].reason, "not found");
	}
	run_ldd(tpath("app"), "", &ldd, &miss);
	CHECK_EQ(miss.n, 1);
	CHECK(miss.n == 1 && strcmp(miss.v[0], "libB.so") == 0);

	/* With no opts to report into, a missing library fails the call. */
	err[0] = '\0';
	setenv("LD_LIBRARY_PATH", "", 1);
	unsetenv("LD_PRELOAD");
	ret = ld_resolve_needed(tpath("app"), &paths, &n, NULL, err, sizeof(err));
	CHECK_EQ(ret, -ENOENT);
	CHECK_CONTAINS(err, "libB.so");
	CHECK(paths == NULL && n == 0);
	list_free(&got);
	list_free(&ldd);
	list_free(&miss);
	ld_opts_release(&o);
}

TEST(ld_rpath_against_runpath)
{
	struct ld_opts o = { .library_path = llp2_dir };
	struct list got = { 0 }, ldd = { 0 }, ours = { 0 }, miss = { 0 };
	char err[512], env[PATH_MAX + 32];

	snprintf(env, sizeof(env), "LD_LIBRARY_PATH=%s", tpath("llp2"));

	/* DT_RPATH beats LD_LIBRARY_PATH and is inherited by libP's own search. */
	CHECK_EQ(resolve(tpath("app_rpath"), &o, &got, err, sizeof(err)), 0);
	CHECK(list_has(&got, tpath("rp/libP.so")));
	CHECK(!list_has(&got, tpath("llp2/libP.so")));
	CHECK(list_has(&got, tpath("q/libQ.so")));
	CHECK_EQ(o.n_missing, 0);
	run_ldd(tpath("app_rpath"), env, &ldd, &miss);
	ours_as_ldd(got.v, got.n, &ours);
	CHECK(list_eq(&ours, &ldd));
	CHECK_EQ(miss.n, 0);
	list_free(&got);
	list_free(&ldd);
	list_free(&ours);
	list_free(&miss);

	/* DT_RUNPATH loses to LD_LIBRARY_PATH and is not inherited: libQ is missing. */
	CHECK_EQ(resolve(tpath("app_runpath"), &o, &got, err, sizeof(err)), 0);
	CHECK(list_has(&got, tpath("llp2/libP.so")));
	CHECK(!list_has(&got, tpath("rp/libP.so")));
	CHECK_EQ(o.n_missing, 1);
	if (o.n_missing == 1) {
		CHECK_STR(o.missing[0].name, "libQ.so");
		CHECK_STR(o.missing[0].needed_by, tpath("llp2/libP.so"));
	}
	run_ldd(tpath("app_runpath"), env, &ldd, &miss);
	ours_as_ldd(got.v, got.n, &ours);
	CHECK(list_eq(&ours, &ldd));
	CHECK(miss.n == 1 && strcmp(miss.v[0], "libQ.so") == 0);
	list_free(&got);
	list_free(&ldd);
	list_free(&ours);
	list_free(&miss);
	ld_opts_release(&o);
}

TEST(ld_runpath_of_the_loader_disables_rpaths)
{
	struct ld_opts o = { 0 };
	struct list got = { 0 }, ldd = { 0 }, ours = { 0 }, miss = { 0 };
	char err[512];

	/*
	 * The exe's DT_RPATH has q/, but libP, which needs libQ, has a DT_RUNPATH:
	 * then no DT_RPATH at all is searched for libP's needs.
	 */
	CHECK_EQ(resolve(tpath("app_rpath2"), &o, &got, err, sizeof(err)), 0);
	CHECK(list_has(&got, tpath("rp2/libP.so")));
	CHECK(!list_has(&got, tpath("q/libQ.so")));
	CHECK(o.n_missing == 1 && strcmp(o.missing[0].name, "libQ.so") == 0);
	run_ldd(tpath("app_rpath2"), "", &ldd, &miss);
	ours_as_ldd(got.v, got.n, &ours);
	CHECK(list_eq(&ours, &ldd));
	CHECK(miss.n == 1 && strcmp(miss.v[0], "libQ.so") == 0);
	list_free(&got);
	list_free(&ldd);
	list_free(&ours);
	list_free(&miss);
	ld_opts_release(&o);
}

TEST(ld_rpath_ignored_next_to_runpath)
{
	struct ld_opts o = { 0 };
	struct list got = { 0 }, ldd = { 0 }, ours = { 0 }, miss = { 0 };
	struct elf_dyninfo di;
	char err[512], want[PATH_MAX * 2];

	snprintf(want, sizeof(want), "%s/q:%s/rp", tmp, tmp);
	CHECK_EQ(elf_dynamic_info(tpath("app_both"), &di, err, sizeof(err)), 0);
	CHECK_STR(di.rpath, want);
	CHECK_STR(di.runpath, tpath("rp"));
	elf_dyninfo_free(&di);

	/*
	 * libP comes through DT_RUNPATH. libP has no search path, so its libQ is
	 * looked for in its loaders' DT_RPATHs: the exe's q/ would have it, but
	 * an object with DT_RUNPATH has no DT_RPATH as far as ld.so cares.
	 */
	CHECK_EQ(resolve(tpath("app_both"), &o, &got, err, sizeof(err)), 0);
	CHECK(list_has(&got, tpath("rp/libP.so")));
	CHECK(!list_has(&got, tpath("q/libQ.so")));
	CHECK(o.n_missing == 1 && strcmp(o.missing[0].name, "libQ.so") == 0);
	run_ldd(tpath("app_both"), "", &ldd, &miss);
	ours_as_ldd(got.v, got.n, &ours);
	CHECK(list_eq(&ours, &ldd));
	CHECK(miss.n == 1 && strcmp(miss.v[0], "libQ.so") == 0);
	list_free(&got);
	list_free(&ldd);
	list_free(&ours);
	list_free(&miss);
	ld_opts_release(&o);
}

TEST(ld_soname_matches_loaded_object)
{
	struct ld_opts o = { .library_path = llp_dir };
	struct list got = { 0 }, ldd = { 0 }, ours = { 0 }, miss = { 0 };
	char err[512], pre[PATH_MAX], env[PATH_MAX * 3];

	/*
	 * A preloaded libB from elsewhere answers to its soname: libA's
	 * "libB.so" takes it, and the copy in LD_LIBRARY_PATH is never loaded.
	 */
	snprintf(pre, sizeof(pre), "%s", tpath("other/libB.so"));
	o.preload = pre;
	CHECK_EQ(resolve(tpath("app"), &o, &got, err, sizeof(err)), 0);
	CHECK(list_has(&got, tpath("other/libB.so")));
	CHECK(!list_has(&got, tpath("llp/libB.so")));
	snprintf(env, sizeof(env), "LD_LIBRARY_PATH=%s LD_PRELOAD=%s", llp_dir, pre);
	run_ldd(tpath("app"), env, &ldd, &miss);
	ours_as_ldd(got.v, got.n, &ours);
	CHECK(list_eq(&ours, &ldd));
	list_free(&got);
	list_free(&ldd);
	list_free(&ours);
	list_free(&miss);
	ld_opts_release(&o);
}

TEST(ld_nodeflib)
{
	struct ld_opts o = { 0 };
	struct list got = { 0 }, ldd = { 0 }, ours = { 0 }, miss = { 0 };
	char err[512], libdir[PATH_MAX], env[PATH_MAX + 32];

	CHECK_EQ(resolve(tpath("app_nodeflib"), &o, &got, err, sizeof(err)), 0);
	CHECK_EQ(got.n, 1);	/* the interpreter only */
	CHECK(o.n_missing == 1 && strcmp(o.missing[0].name, "libc.so.6") == 0);
	run_ldd(tpath("app_nodeflib"), "", &ldd, &miss);
	CHECK(miss.n == 1 && strcmp(miss.v[0], "libc.so.6") == 0);
	list_free(&got);
	list_free(&ldd);
	list_free(&miss);

	/* LD_LIBRARY_PATH still works. */
	snprintf(libdir, sizeof(libdir), "%s", libc_path);
	*strrchr(libdir, '/') = '\0';
	o.library_path = libdir;
	CHECK_EQ(resolve(tpath("app_nodeflib"), &o, &got, err, sizeof(err)), 0);
	CHECK_EQ(o.n_missing, 0);
	snprintf(env, sizeof(env), "LD_LIBRARY_PATH=%s", libdir);
	run_ldd(tpath("app_nodeflib"), env, &ldd, &miss);
	ours_as_ldd(got.v, got.n, &ours);
	CHECK(list_eq(&ours, &ldd));
	CHECK_EQ(miss.n, 0);
	list_free(&got);
	list_free(&ldd);
	list_free(&ours);
	list_free(&miss);
	ld_opts_release(&o);
}

TEST(ld_empty_element_is_cwd)
{
	struct ld_opts o = { .library_path = "/nonexistent-corobpf::" };
	struct list got = { 0 }, ldd = { 0 }, ours = { 0 }, miss = { 0 };
	char err[512], *cwd = getcwd(NULL, 0);

	/* An empty element of a list is the current directory, wherever that is. */
	CHECK(chdir(llp_dir) == 0);
	CHECK_EQ(resolve(tpath("app"), &o, &got, err, sizeof(err)), 0);
	CHECK(list_has(&got, tpath("llp/libB.so")));	/* made absolute */
	run_ldd(tpath("app"), "LD_LIBRARY_PATH=/nonexistent-corobpf::", &ldd, &miss);
	ours_as_ldd(got.v, got.n, &ours);
	CHECK(list_eq(&ours, &ldd));
	CHECK(cwd && chdir(cwd) == 0);
	free(cwd);
	list_free(&got);
	list_free(&ldd);
	list_free(&ours);
	list_free(&miss);
	ld_opts_release(&o);
}

/* An opener for ld_opts: counts its calls, and refuses all after cancel_after of them. */
struct count_opener {
	unsigned int calls, cancel_after;
};

static int counting_open(void *ctx, const char *dir, const char *name)
{
	struct count_opener *c = ctx;
	char path[2 * PATH_MAX + 2];
	int fd;

	if (c->cancel_after && c->calls >= c->cancel_after)
		return -ECANCELED;
	c->calls++;
	if (dir)
		snprintf(path, sizeof(path), "%s%s%s", dir, dir[0] ? "/" : "", name);
	else
		snprintf(path, sizeof(path), "%s", name);
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	return fd < 0 ? -errno : fd;
}

TEST(ld_opener_descriptors_and_bounds)
{
	struct count_opener c = { 0 }, c2 = { 0 };
	struct ld_opts o = { .library_path = llp_dir, .preload = "", .preload_file = "",
			     .open_file = counting_open, .open_ctx = &c, .want_fds = 1 };
	struct list plain = { 0 };
	char err[512], **paths, *many;
	size_t n, i, len;
	int ret;

	/* Through an opener, with descriptors: the same objects, each descriptor its file. */
	{
		struct ld_opts p = { .library_path = llp_dir };

		CHECK_EQ(resolve(tpath("app"), &p, &plain, err, sizeof(err)), 0);
		ld_opts_release(&p);
	}
	ret = ld_resolve_needed(tpath("app"), &paths, &n, &o, err, sizeof(err));
	CHECK_EQ(ret, 0);
	CHECK_EQ(n, plain.n);
	CHECK_EQ(o.n_fds, n);
	CHECK(!o.cut_short);
	for (i = 0; !ret && i < n && i < plain.n && i < o.n_fds; i++) {
		struct stat a, b;

		CHECK_STR(paths[i], plain.v[i]);
		CHECK(o.fds[i] >= 0 && fstat(o.fds[i], &a) == 0 && stat(paths[i], &b) == 0 &&
		      a.st_dev == b.st_dev && a.st_ino == b.st_ino);
	}
	ld_paths_free(paths, n);
	ld_opts_release(&o);
	CHECK(c.calls > 0);

	/* A directory listed again is searched once, as ld.so does. */
	len = 50 * (strlen(llp_dir) + 1);
	many = malloc(len + 1);
	many[0] = '\0';
	for (i = 0; i < 50; i++) {
		strcat(many, llp_dir);
		strcat(many, ":");
	}
	many[strlen(many) - 1] = '\0';
	o = (struct ld_opts){ .library_path = many, .preload = "", .preload_file = "",
			      .open_file = counting_open, .open_ctx = &c2 };
	CHECK_EQ(ld_resolve_needed(tpath("app"), &paths, &n, &o, err, sizeof(err)), 0);
	CHECK_EQ(c2.calls, c.calls);
	ld_paths_free(paths, n);
	ld_opts_release(&o);
	free(many);

	/* Past max_library_path: the first entries only, and the search says it was cut. */
	len = 300 * 32 + strlen(llp_dir) + 1;
	many = malloc(len);
	many[0] = '\0';
	for (i = 0; i < 300; i++)
		sprintf(many + strlen(many), "/nonexistent-corobpf-%zu:", i);
	strcat(many, llp_dir);
	o = (struct ld_opts){ .library_path = many, .preload = "", .preload_file = "",
			      .max_library_path = 10 };
	CHECK_EQ(ld_resolve_needed(tpath("app"), &paths, &n, &o, err, sizeof(err)), 0);
	CHECK(o.cut_short);
	CHECK_CONTAINS(o.cut_reason, "301 entries");
	CHECK_CONTAINS(o.cut_reason, "first 10");
	for (i = 0; i < n; i++)
		CHECK(strcmp(paths[i], tpath("llp/libB.so")));
	ld_paths_free(paths, n);
	ld_opts_release(&o);
	free(many);

	/* Past max_names: stopped there, and what was not looked for is not called missing. */
	o = (struct ld_opts){ .library_path = llp_dir, .preload = "", .preload_file = "",
			      .max_names = 1 };
	CHECK_EQ(ld_resolve_needed(tpath("app"), &paths, &n, &o, err, sizeof(err)), 0);
	CHECK(o.cut_short);
	CHECK_CONTAINS(o.cut_reason, "more than 1 libraries");
	CHECK_EQ(n, 2);	/* the interpreter and the first library */
	CHECK_EQ(o.n_missing, 0);
	ld_paths_free(paths, n);
	ld_opts_release(&o);

	/* The opener's -ECANCELED (its budget) stops the search the same way. */
	c = (struct count_opener){ .cancel_after = 2 };	/* the interpreter, the cache */
	o = (struct ld_opts){ .library_path = llp_dir, .preload = "", .preload_file = "",
			      .open_file = counting_open, .open_ctx = &c };
	CHECK_EQ(ld_resolve_needed(tpath("app"), &paths, &n, &o, err, sizeof(err)), 0);
	CHECK(o.cut_short);
	CHECK_EQ(n, 1);
	CHECK_EQ(o.n_missing, 0);
	ld_paths_free(paths, n);
	ld_opts_release(&o);
	list_free(&plain);
}

TEST(ld_hwcap_subdirectories)
{
	static const char *const dirs[] = { "llph", "llpl" };
	size_t i;

	/* Which copy wins depends on the CPU: the loader on this one decides. */
	for (i = 0; i < 2; i++) {
		struct list got = { 0 }, ldd = { 0 }, ours = { 0 }, miss = { 0 };
		char err[512], dir[PATH_MAX], env[PATH_MAX + 32];
		struct ld_opts o = { 0 };

		snprintf(dir, sizeof(dir), "%s", tpath(dirs[i]));
		o.library_path = dir;
		CHECK_EQ(resolve(tpath("app"), &o, &got, err, sizeof(err)), 0);
		/* x86_64/ and tls/ are searched on every x86-64 CPU; the levels may not be. */
		if (i == 1)
			CHECK(!list_has(&got, tpath("llpl/libB.so")));
		snprintf(env, sizeof(env), "LD_LIBRARY_PATH=%s", dir);
		run_ldd(tpath("app"), env, &ldd, &miss);
		ours_as_ldd(got.v, got.n, &ours);
		CHECK(list_eq(&ours, &ldd));
		if (!list_eq(&ours, &ldd)) {
			list_print("ours", &ours);
			list_print("ldd", &ldd);
		}
		list_free(&got);
		list_free(&ldd);
		list_free(&ours);
		list_free(&miss);
		ld_opts_release(&o);
	}
}

TEST(ld_preload_first)
{
	struct ld_opts o = { .library_path = llp_dir };
	struct list got = { 0 }, ldd = { 0 }, ours = { 0 }, miss = { 0 };
	char err[512], pre[PATH_MAX * 2], env[PATH_MAX * 3], pfile[PATH_MAX];
	size_t i;

	/* A path, a bare name found through the cache, a name nobody has. */
	snprintf(pre, sizeof(pre), "%s libz.so.1:libcorobpf-nonexistent.so", tpath("llp/libB.so"));
	o.preload = pre;
	CHECK_EQ(resolve(tpath("app"), &o, &got, err, sizeof(err)), 0);
	CHECK(got.n == 5);
	if (got.n == 5) {
		CHECK_STR(got.v[0], "/lib64/ld-linux-x86-64.so.2");
		CHECK_STR(got.v[1], tpath("llp/libB.so"));
		CHECK(strstr(got.v[2], "/libz.so.1") != NULL);
		CHECK_STR(got.v[3], tpath("lib/libA.so"));
		CHECK_STR(got.v[4], libc_path);
	}
	/* libA's "libB.so" matched the preloaded object by soname. */
	for (i = 0; i < got.n; i++)
		CHECK(i == 1 || !strstr(got.v[i], "libB.so"));
	CHECK_EQ(o.n_missing, 1);
	if (o.n_missing == 1) {
		CHECK_STR(o.missing[0].name, "libcorobpf-nonexistent.so");
		CHECK_STR(o.missing[0].needed_by, "LD_PRELOAD");
	}
	snprintf(env, sizeof(env), "LD_LIBRARY_PATH=%s LD_PRELOAD='%s'", tpath("llp"), pre);
	run_ldd(tpath("app"), env, &ldd, &miss);
	ours_as_ldd(got.v, got.n, &ours);
	CHECK(list_eq(&ours, &ldd));
	if (!list_eq(&ours, &ldd)) {
		list_print("ours", &ours);
		list_print("ldd", &ldd);
	}
	list_free(&got);
	list_free(&ldd);
	list_free(&ours);
	list_free(&miss);

	/* /etc/ld.so.preload comes after LD_PRELOAD; '#' comments, any separator. */
	put("preload.conf", "# emergency preloads\n libz.so.1 # zlib\n\tlibm.so.6:\n");
	o.preload = "libexpat.so.1";
	snprintf(pfile, sizeof(pfile), "%s", tpath("preload.conf"));
	o.preload_file = pfile;
	CHECK_EQ(resolve(tpath("app"), &o, &got, err, sizeof(err)), 0);
	CHECK(got.n == 7);
	if (got.n != 7) {
		list_print("got", &got);
		missing_print(&o);
	} else {
		CHECK(strstr(got.v[1], "/libexpat.so.1") != NULL);
		CHECK(strstr(got.v[2], "/libz.so.1") != NULL);
		CHECK(strstr(got.v[3], "/libm.so.6") != NULL);
		CHECK_STR(got.v[4], tpath("lib/libA.so"));
	}
	CHECK_EQ(o.n_missing, 0);
	list_free(&got);
	ld_opts_release(&o);
}

TEST(ld_origin_lib_and_symlinked_exe)
{
	struct ld_opts o = { .library_path = llp_dir };
	struct list got = { 0 }, ldd = { 0 }, ours = { 0 }, miss = { 0 };
	char err[512], env[PATH_MAX + 32];

	/* ${ORIGIN}/$LIB: Debian's $LIB is lib/x86_64-linux-gnu. */
	CHECK_EQ(resolve(tpath("app_lib"), &o, &got, err, sizeof(err)), 0);
	CHECK(list_has(&got, tpath("lib/x86_64-linux-gnu/libA.so")));
	CHECK_EQ(o.n_missing, 0);
	snprintf(env, sizeof(env), "LD_LIBRARY_PATH=%s", tpath("llp"));
	run_ldd(tpath("app_lib"), env, &ldd, &miss);
	ours_as_ldd(got.v, got.n, &ours);
	CHECK(list_eq(&ours, &ldd));
	list_free(&got);

	/*
	 * A symlink in another directory: the kernel gives ld.so the real path,
	 * so $ORIGIN is the target's directory. (ldd would say otherwise: it
	 * runs ld.so on the name as given.)
	 */
	CHECK_EQ(resolve(tpath("link/app"), &o, &got, err, sizeof(err)), 0);
	CHECK(list_has(&got, tpath("lib/libA.so")));
	CHECK_EQ(o.n_missing, 0);
	list_free(&got);
	list_free(&ldd);
	list_free(&ours);
	list_free(&miss);
	ld_opts_release(&o);
}

TEST(ld_needed_with_slash)
{
	struct ld_opts o = { 0 };
	struct list got = { 0 }, ldd = { 0 }, ours = { 0 }, miss = { 0 };
	char err[512];

	CHECK_EQ(resolve(tpath("app_abs"), &o, &got, err, sizeof(err)), 0);
	CHECK(got.n == 3 && strcmp(got.v[1], tpath("abs/libS.so")) == 0);
	run_ldd(tpath("app_abs"), "", &ldd, &miss);
	ours_as_ldd(got.v, got.n, &ours);
	CHECK(list_eq(&ours, &ldd));
	list_free(&got);
	list_free(&ldd);
	list_free(&ours);
	list_free(&miss);
	ld_opts_release(&o);
}

TEST(ld_candidates_ld_so_skips_or_refuses)
{
	struct ld_opts o = { 0 };
	struct list got = { 0 }, ldd = { 0 }, ours = { 0 }, miss = { 0 };
	uint8_t cls = ELFCLASS32;
	uint16_t mach = EM_AARCH64;
	char err[512], llp[PATH_MAX * 3], env[PATH_MAX * 4];

	/* Another class or machine first in the path: skipped, the search goes on. */
	patch_copy(tpath("llp/libB.so"), tpath("bad32/libB.so"), EI_CLASS, &cls, 1);
	patch_copy(tpath("llp/libB.so"), tpath("badm/libB.so"), offsetof(Elf64_Ehdr, e_machine),
		   &mach, 2);
	snprintf(llp, sizeof(llp), "%s:%s;%s", tpath("bad32"), tpath("badm"), tpath("llp"));
	o.library_path = llp;
	CHECK_EQ(resolve(tpath("app"), &o, &got, err, sizeof(err)), 0);
	CHECK(list_has(&got, tpath("llp/libB.so")));
	CHECK_EQ(o.n_missing, 0);
	snprintf(env, sizeof(env), "LD_LIBRARY_PATH='%s'", llp);
	CHECK_EQ(run_ldd(tpath("app"), env, &ldd, &miss), 0);
	ours_as_ldd(got.v, got.n, &ours);
	CHECK(list_eq(&ours, &ldd));
	list_free(&got);
	list_free(&ldd);
	list_free(&ours);
	list_free(&miss);

	/* Not an ELF at all: ld.so stops there and fails, so it is missing, with why. */
	put("badtxt/libB.so", "/* GNU ld script: a text file where ld.so expects an ELF object */\n"
			      "INPUT(-lfoo)\n");
	snprintf(llp, sizeof(llp), "%s:%s", tpath("badtxt"), tpath("llp"));
	o.library_path = llp;
	CHECK_EQ(resolve(tpath("app"), &o, &got, err, sizeof(err)), 0);
	CHECK(!list_has(&got, tpath("llp/libB.so")));
	CHECK_EQ(o.n_missing, 1);
	if (o.n_missing == 1) {
		CHECK_STR(o.missing[0].name, "libB.so");
		CHECK_CONTAINS(o.missing[0].reason, "invalid ELF header");
		CHECK_CONTAINS(o.missing[0].reason, tpath("badtxt/libB.so"));
	}
	snprintf(env, sizeof(env), "LD_LIBRARY_PATH='%s'", llp);
	CHECK(run_ldd(tpath("app"), env, &ldd, &miss) != 0);	/* ld.so gives up too */
	list_free(&got);
	list_free(&ldd);
	list_free(&miss);
	ld_opts_release(&o);
}

TEST(ld_static_and_bad_executables)
{
	struct ld_opts o = { 0 };
	struct list got = { 0 };
	char err[512];

	CHECK_EQ(resolve(tpath("plain_static"), &o, &got, err, sizeof(err)), 0);
	CHECK_EQ(got.n, 0);
	err[0] = '\0';
	CHECK_EQ(resolve(tpath("text.so"), &o, &got, err, sizeof(err)), -ENOEXEC);
	CHECK_CONTAINS(err, tpath("text.so"));
	err[0] = '\0';
	CHECK_EQ(resolve(tpath("does-not-exist"), &o, &got, err, sizeof(err)), -ENOENT);
	CHECK_CONTAINS(err, "does-not-exist");
	err[0] = '\0';
	CHECK_EQ(resolve(tpath("asarm"), &o, &got, err, sizeof(err)), -ENOEXEC);
	CHECK_CONTAINS(err, "aarch64");
	CHECK_EQ(got.n, 0);
	ld_opts_release(&o);
}

TEST(ld_system_binaries_match_ldd)
{
	static const char *const bins[] = { "/bin/ls", "/usr/bin/python3", "/usr/sbin/bpftool",
					    "/usr/bin/ssh", "/usr/bin/gdb" };
	size_t i, tried = 0;

	for (i = 0; i < sizeof(bins) / sizeof(bins[0]); i++) {
		struct list got = { 0 }, ldd = { 0 }, ours = { 0 }, miss = { 0 };
		struct ld_opts o = { 0 };
		char err[512], rp[PATH_MAX];

		if (access(bins[i], X_OK) != 0)
			continue;
		tried++;
		canon(bins[i], rp);	/* see ld_origin_lib_and_symlinked_exe */
		CHECK_EQ(resolve(rp, &o, &got, err, sizeof(err)), 0);
		CHECK(got.n > 0 && strcmp(got.v[0], "/lib64/ld-linux-x86-64.so.2") == 0);
		CHECK_EQ(run_ldd(rp, "", &ldd, &miss), 0);
		ours_as_ldd(got.v, got.n, &ours);
		CHECK(list_eq(&ours, &ldd));
		if (!list_eq(&ours, &ldd)) {
			fprintf(stderr, "  %s:\n", bins[i]);
			list_print("ours", &ours);
			list_print("ldd", &ldd);
		}
		CHECK_EQ(o.n_missing, miss.n);
		list_free(&got);
		list_free(&ldd);
		list_free(&ours);
		list_free(&miss);
		ld_opts_release(&o);
	}
	CHECK(tried >= 1);
}

/* ---- ld.so.cache ---- */

struct cache_ent {
	int32_t flags;
	const char *key, *value;
	uint64_t hwcap;
};

/* A new-format cache as ldconfig 2.36 writes it (our own writer, for tests). */
static void write_cache(const char *path, const struct cache_ent *e, size_t n)
{
	size_t strings = 48 + n * 24, len = strings, i, at;
	char *buf;

	for (i = 0; i < n; i++)
		len += strlen(e[i].key) + 1 + strlen(e[i].value) + 1;
	buf = calloc(1, len);
	memcpy(buf, "glibc-ld.so.cache1.1", 20);
	memcpy(buf + 20, &(uint32_t){ n }, 4);
	memcpy(buf + 24, &(uint32_t){ len - strings }, 4);
	buf[28] = 2;	/* little endian */
	at = strings;
	for (i = 0; i < n; i++) {
		char *ent = buf + 48 + i * 24;

		memcpy(ent, &e[i].flags, 4);
		memcpy(ent + 4, &(uint32_t){ at }, 4);
		strcpy(buf + at, e[i].key);
		at += strlen(e[i].key) + 1;
		memcpy(ent + 8, &(uint32_t){ at }, 4);
		strcpy(buf + at, e[i].value);
		at += strlen(e[i].value) + 1;
		memcpy(ent + 16, &e[i].hwcap, 8);
	}
	write_file(path, buf, len);
	free(buf);
}

TEST(ld_cache_own_file)
{
	char wrong[PATH_MAX], hw[PATH_MAX], cache[PATH_MAX], err[512], *p;
	struct list got = { 0 };
	struct ld_opts o = { 0 };
	struct cache_ent ents[4];

	/* Entries ld.so must pass over come first: i386, hwcap-tagged. */
	snprintf(wrong, sizeof(wrong), "%s", tpath("bad32/libB.so"));
	snprintf(hw, sizeof(hw), "%s", tpath("badm/libB.so"));
	ents[0] = (struct cache_ent){ 0x0003, "libB.so", wrong, 0 };
	ents[1] = (struct cache_ent){ 0x0303, "libB.so", hw, 1ull << 62 };
	ents[2] = (struct cache_ent){ 0x0303, "libB.so", tpath("llp/libB.so"), 0 };
	ents[3] = (struct cache_ent){ 0x0303, "libB.so.1", tpath("q/libQ.so"), 0 };
	write_cache(tpath("own.cache"), ents, 4);

	CHECK_EQ(ld_cache_lookup(tpath("own.cache"), "libB.so", &p, err, sizeof(err)), 0);
	CHECK_STR(p, tpath("llp/libB.so"));
	free(p);
	CHECK_EQ(ld_cache_lookup(tpath("own.cache"), "libB", &p, err, sizeof(err)), -ENOENT);
	CHECK(p == NULL);

	/* libB now comes from the cache, with no LD_LIBRARY_PATH. */
	snprintf(cache, sizeof(cache), "%s", tpath("own.cache"));
	o.cache_file = cache;
	CHECK_EQ(resolve(tpath("app"), &o, &got, err, sizeof(err)), 0);
	CHECK(list_has(&got, tpath("llp/libB.so")));
	CHECK_EQ(o.n_missing, 0);
	CHECK_STR(o.cache_error, "");
	/* libc is not in this cache: found in the default directories all the same. */
	CHECK(list_has(&got, "/lib/x86_64-linux-gnu/libc.so.6"));
	list_free(&got);
	ld_opts_release(&o);

	/* The real cache agrees with ldconfig about libc. */
	CHECK_EQ(ld_cache_lookup(NULL, "libc.so.6", &p, err, sizeof(err)), 0);
	CHECK_STR(p, libc_path);
	free(p);
}

TEST(ld_cache_corrupt_falls_back)
{
	struct cache_ent ent = { 0x0303, "libB.so", "/nonexistent/libB.so", 0 };
	struct list base = { 0 }, got = { 0 };
	char err[512], *p, name[64], *buf, cache[PATH_MAX];
	struct ld_opts o = { 0 };
	uint32_t v;
	size_t len, i;

	/* The answer without any cache: the default directories alone. */
	o.cache_file = "";
	CHECK_EQ(resolve("/bin/ls", &o, &base, err, sizeof(err)), 0);
	CHECK(base.n >= 2);
	ld_opts_release(&o);

	write_cache(tpath("good.cache"), &ent, 1);
	buf = read_file(tpath("good.cache"), &len);
	write_file(tpath("c0.cache"), buf, 10);			/* truncated header */
	write_file(tpath("c1.cache"), "glibc-ld.so.cache1.0", 20);	/* wrong version */
	v = 0x10000000;						/* entries past EOF */
	patch_copy(tpath("good.cache"), tpath("c2.cache"), 20, &v, 4);
	v = 0xfffffff0;						/* key outside the file */
	patch_copy(tpath("good.cache"), tpath("c3.cache"), 48 + 4, &v, 4);
	v = len - 48 + 1000;					/* value outside the file */
	patch_copy(tpath("good.cache"), tpath("c4.cache"), 48 + 8, &v, 4);
	write_file(tpath("c5.cache"), buf, len - 1);		/* last string unterminated */
	patch_copy(tpath("good.cache"), tpath("c6.cache"), 28, &(uint8_t){ 3 }, 1); /* big endian */
	for (i = 0; i < len; i++)
		buf[i] = (char)(i * 131 + 7);
	write_file(tpath("c7.cache"), buf, len);			/* noise */
	free(buf);

	for (i = 0; i <= 7; i++) {
		snprintf(name, sizeof(name), "c%zu.cache", i);
		err[0] = '\0';
		CHECK_EQ(ld_cache_lookup(tpath(name), "libB.so", &p, err, sizeof(err)), -EINVAL);
		CHECK(p == NULL);
		CHECK_CONTAINS(err, tpath(name));

		snprintf(cache, sizeof(cache), "%s", tpath(name));
		o.cache_file = cache;
		CHECK_EQ(resolve("/bin/ls", &o, &got, err, sizeof(err)), 0);
		CHECK(list_eq(&got, &base));
		CHECK_CONTAINS(o.cache_error, tpath(name));
		list_free(&got);
		ld_opts_release(&o);
	}

	/* No cache file at all is a valid system, not a warning. */
	snprintf(cache, sizeof(cache), "%s", tpath("no-such.cache"));
	o.cache_file = cache;
	CHECK_EQ(resolve("/bin/ls", &o, &got, err, sizeof(err)), 0);
	CHECK(list_eq(&got, &base));
	CHECK_STR(o.cache_error, "");
	CHECK_EQ(ld_cache_lookup(tpath("no-such.cache"), "libc.so.6", &p, err, sizeof(err)),
		 -ENOENT);
	list_free(&got);
	list_free(&base);
	ld_opts_release(&o);
}

static bool find_srcdir(void)
{
	const char *env = getenv("COROBPF_SRCDIR");
	char probe[PATH_MAX + 32];
	size_t len;

	if (env) {
		snprintf(srcdir, sizeof(srcdir), "%s", env);
	} else {
		/* __FILE__ is tests/unit/test_elf.c relative to where make ran. */
		snprintf(srcdir, sizeof(srcdir), "%s", __FILE__);
		len = strlen(srcdir);
		if (len >= strlen("tests/unit/test_elf.c"))
			srcdir[len - strlen("tests/unit/test_elf.c")] = '\0';
		if (!srcdir[0])
			strcpy(srcdir, ".");
	}
	snprintf(probe, sizeof(probe), "%s/usdt/corobpf.h", srcdir);
	if (!realpath(srcdir, probe) || access(strcat(probe, "/usdt/corobpf.h"), R_OK))
		return false;
	probe[strlen(probe) - strlen("/usdt/corobpf.h")] = '\0';
	return snprintf(srcdir, sizeof(srcdir), "%s", probe) < (int)sizeof(srcdir);
}

int main(void)
{
	struct list l = { 0 };
	int rc;

	if (!find_srcdir()) {
		fprintf(stderr, "test_elf: usdt/corobpf.h not found; run from the source tree "
				"or set COROBPF_SRCDIR\n");
		return 1;
	}
	snprintf(tmp, sizeof(tmp), "%s/corobpf-test-elf.XXXXXX",
		 getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	if (!mkdtemp(tmp)) {
		perror("mkdtemp");
		return 1;
	}
	snprintf(llp_dir, sizeof(llp_dir), "%s/llp", tmp);
	snprintf(llp2_dir, sizeof(llp2_dir), "%s/llp2", tmp);
	fixtures_ok = build_fixtures() == 0;
	if (fixtures_ok) {
		/* Which libc the loader picks is the oracle's to say. */
		run_ldd(tpath("plain"), "", &l, NULL);
		list_free(&l);
		fixtures_ok = libc_path[0] != '\0';
	}
	if (!fixtures_ok) {
		fprintf(stderr, "test_elf: cannot build the test objects in %s\n", tmp);
		return 1;
	}

	RUN(probes_executable);
	RUN(probes_site_kinds);
	RUN(probes_five_byte_sites_are_probed_at_the_step_before);
	RUN(probes_object_file);
	RUN(probes_shared_library);
	RUN(probes_none);
	RUN(probes_malformed_notes);
	RUN(probes_sdk_sites_accepted);
	RUN(probes_refuse_sites);
	RUN(probes_refuse_semaphores);
	RUN(probes_refuse_names_and_segments);
	RUN(probes_declared_sizes);
	RUN(probes_hostile_many);
	RUN(probes_random_damage);
	RUN(not_elf_and_truncated);
	RUN(wrong_class_and_machine);
	RUN(dynamic_info);
	RUN(ld_tree_runpath_origin_and_llp);
	RUN(ld_missing_library);
	RUN(ld_rpath_against_runpath);
	RUN(ld_runpath_of_the_loader_disables_rpaths);
	RUN(ld_rpath_ignored_next_to_runpath);
	RUN(ld_soname_matches_loaded_object);
	RUN(ld_nodeflib);
	RUN(ld_empty_element_is_cwd);
	RUN(ld_opener_descriptors_and_bounds);
	RUN(ld_hwcap_subdirectories);
	RUN(ld_preload_first);
	RUN(ld_origin_lib_and_symlinked_exe);
	RUN(ld_needed_with_slash);
	RUN(ld_candidates_ld_so_skips_or_refuses);
	RUN(ld_static_and_bad_executables);
	RUN(ld_system_binaries_match_ldd);
	RUN(ld_cache_own_file);
	RUN(ld_cache_corrupt_falls_back);

	rc = unit_done();
	if (!getenv("TEST_ELF_KEEP"))
		sh("rm -rf '%s'", tmp);
	else
		fprintf(stderr, "test_elf: kept %s\n", tmp);
	return rc;
}
