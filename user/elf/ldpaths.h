/* SPDX-License-Identifier: MIT */
/*
 * ldpaths.h: the objects glibc's dynamic loader will map for an executable,
 * computed before the executable runs.
 *
 * `corobpf -- ./server` must attach to every object with probes before the
 * program runs its first instruction, so it cannot wait for the loader to
 * tell it what it mapped. ld_resolve_needed() redoes the loader's work on
 * paper: the interpreter, LD_PRELOAD and /etc/ld.so.preload, and the
 * breadth-first DT_NEEDED closure, searched the way glibc 2.36 on x86-64
 * Debian searches (see ldpaths.c for the rules and how they were checked).
 *
 *     struct ld_opts opts = { .library_path = child_env_ld_library_path };
 *     char **paths, err[512];
 *     size_t n, i;
 *
 *     if (ld_resolve_needed("./server", &paths, &n, &opts, err, sizeof(err)) < 0)
 *             die("%s", err);
 *     for (i = 0; i < opts.n_missing; i++)
 *             warn("%s (needed by %s): %s", opts.missing[i].name,
 *                  opts.missing[i].needed_by, opts.missing[i].reason);
 *     if (opts.cache_error[0])
 *             warn("%s", opts.cache_error);
 *     ... attach to paths[0..n) ...
 *     ld_paths_free(paths, n);
 *     ld_opts_release(&opts);
 */
#ifndef COROBPF_LDPATHS_H
#define COROBPF_LDPATHS_H

#include <stddef.h>

/* A library the loader would fail to load. */
struct ld_missing {
	char *name;		/* as written in DT_NEEDED or the preload list */
	char *needed_by;	/* path of the object that needs it, or "LD_PRELOAD" or
				 * the preload file's path */
	char *reason;		/* "not found", or ld.so's reason for refusing the file
				 * it found ("/x/libfoo.so: invalid ELF header") */
};

struct ld_opts {
	/*
	 * In: the launched program's environment. NULL takes this process's
	 * getenv(); "" means unset (ld.so treats an empty value as unset too).
	 */
	const char *library_path;	/* LD_LIBRARY_PATH, ':' or ';' separated */
	const char *preload;		/* LD_PRELOAD, ' ' or ':' separated */
	/* In: system files, NULL for the real ones, "" for none (for tests). */
	const char *preload_file;	/* /etc/ld.so.preload */
	const char *cache_file;		/* /etc/ld.so.cache */
	/*
	 * In: the directory $ORIGIN stands for in the executable's own paths,
	 * NULL for the directory of its real path. Given when exe_path names a
	 * descriptor (/proc/self/fd/N), whose file may have been renamed or
	 * removed since it was opened.
	 */
	const char *origin;

	/*
	 * In: where files are found. NULL: open(2) here, relative paths from
	 * this process's current directory. Otherwise every file is opened by
	 * open_file(open_ctx, dir, name): `name` in directory `dir` (NULL: name
	 * is the whole path), open for reading, or -errno. -ECANCELED ends the
	 * whole search (a budget is spent): what was found so far is returned,
	 * with cut_short set. The executable itself is read by its path.
	 */
	int (*open_file)(void *ctx, const char *dir, const char *name);
	void *open_ctx;
	const char *cwd;		/* relative paths are shown from it; NULL: getcwd() */
	/* In: bounds (0: none); past one the search stops there, cut_short set. */
	unsigned int max_library_path;	/* LD_LIBRARY_PATH entries searched (the first ones) */
	unsigned int max_names;		/* names looked up */
	/* In: return each object's descriptor, the file examined (fds, below). */
	int want_fds;

	/*
	 * Out, valid after ld_resolve_needed() returned 0; ld_opts_release()
	 * frees them. Each call first releases what a previous call left here,
	 * so zero-initialise a new struct ld_opts.
	 */
	struct ld_missing *missing;	/* each name once, in the order ld.so meets them */
	size_t n_missing;
	/* Why the cache was not used ("" if it was, or is absent); the search
	 * then went on without it, as ld.so does. */
	char cache_error[256];
	/*
	 * With want_fds: fds[i] is paths[i] open for reading (-1 if it could
	 * not be kept); the caller takes one by setting it to -1, and
	 * ld_opts_release() closes the others.
	 */
	int *fds;
	size_t n_fds;
	/* The search stopped before its end (a bound, or open_file's -ECANCELED), and why. */
	int cut_short;
	char cut_reason[160];
};

/*
 * Resolve what `exe_path` loads. On success *paths_out holds *n_out
 * absolute paths, each object once (same device and inode = same object):
 * paths[0] is the interpreter (PT_INTERP), then the preloaded objects, then
 * the DT_NEEDED closure in ld.so's breadth-first load order. A static
 * executable gives zero paths. Libraries that cannot be found or loaded are
 * not an error: they go to opts->missing (with opts == NULL, defaults are
 * used and a missing library fails the call with -ENOENT instead).
 *
 * Returns 0, or a negative errno with "what failed on what" in err:
 * -ENOEXEC (exe not an x86-64 ELF), -ENOENT (exe or its interpreter does not
 * exist), -EINVAL (malformed exe), -ENOMEM.
 */
int ld_resolve_needed(const char *exe_path, char ***paths_out, size_t *n_out,
		      struct ld_opts *opts, char *err, size_t errlen);

void ld_paths_free(char **paths, size_t n);

/* The path names the dynamic loader itself (ld-linux-x86-64.so.2, ld64.so.*). */
int ld_path_is_loader(const char *path);

/* Free the out-fields of `opts` (the in-fields are the caller's). */
void ld_opts_release(struct ld_opts *opts);

/*
 * The first LD_LIBRARY_PATH and LD_PRELOAD of an environment block (len bytes of
 * NUL-terminated "NAME=value" strings, env[len] a NUL), malloc'ed into *lib and
 * *preload where those are still NULL.
 */
void ld_env_vars(const char *env, size_t len, char **lib, char **preload);

#endif /* COROBPF_LDPATHS_H */
