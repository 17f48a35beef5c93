// fault-shim.c: an LD_PRELOAD library for test/sys/errno.test.ts. It stands in front of every C library call the
// treeseal addon makes and, for calls made from the addon's own code only (Node's calls pass through untouched),
// fails the first TREESEAL_SHIM_TIMES attempts in a row (from one call site) with errno TREESEAL_SHIM_ERRNO before letting one through.
// close(2) is the exception that shows Linux's rule: it really closes the fd, then reports the errno (as close does
// on EINTR), so a caller that retries it gets EBADF. At exit it writes "<function> <failures>" lines to
// TREESEAL_SHIM_REPORT. Built for LP64 Linux (off_t is a long); only the test compiles it.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#define MAX_NAMES 64

static const char* names[MAX_NAMES];
static long failures[MAX_NAMES];
static int named;
static __thread int in_a_row;
static __thread void* last_site;

static int from_addon(void* caller) {
  Dl_info info;
  return dladdr(caller, &info) != 0 && info.dli_fname != NULL && strstr(info.dli_fname, "treeseal.node") != NULL;
}

static long setting(const char* name, long fallback) {
  const char* v = getenv(name);
  return v != NULL && *v != '\0' ? strtol(v, NULL, 10) : fallback;
}

static void count(const char* name) {
  for (int i = 0; i < named; i++) {
    if (names[i] == name) {
      __atomic_add_fetch(&failures[i], 1, __ATOMIC_RELAXED);
      return;
    }
  }
  if (named < MAX_NAMES) {
    names[named] = name;
    failures[named++] = 1;
  }
}

// Counts the attempts in a row from one call site of the addon (a retry loop calls again from the same
// place); a call from another site starts a new row.
static void track(void* caller) {
  if (caller != last_site) {
    last_site = caller;
    in_a_row = 0;
  }
}

// True when this call (from `caller`) is to fail: the first TIMES attempts in a row from an addon call site.
static int fail(const char* name, void* caller) {
  if (!from_addon(caller)) return 0;
  track(caller);
  if (in_a_row < setting("TREESEAL_SHIM_TIMES", 1)) {
    in_a_row++;
    count(name);
    errno = (int)setting("TREESEAL_SHIM_ERRNO", EINTR);
    return 1;
  }
  in_a_row = 0;
  return 0;
}

__attribute__((destructor)) static void report(void) {
  const char* path = getenv("TREESEAL_SHIM_REPORT");
  if (path == NULL) return;
  FILE* f = fopen(path, "w");
  if (f == NULL) return;
  for (int i = 0; i < named; i++) fprintf(f, "%s %ld\n", names[i], failures[i]);
  fclose(f);
}

#define REAL(ret, name, params) \
  static ret(*real) params;     \
  if (real == NULL) real = (ret(*) params)dlsym(RTLD_NEXT, #name)

#define SHIM(ret, name, params, args)                             \
  ret name params {                                               \
    REAL(ret, name, params);                                      \
    if (fail(#name, __builtin_return_address(0))) return (ret)-1; \
    return real args;                                             \
  }

SHIM(int, fstat, (int fd, void* st), (fd, st))
SHIM(int, fstat64, (int fd, void* st), (fd, st))
SHIM(int, fstatat, (int dirfd, const char* path, void* st, int flags), (dirfd, path, st, flags))
SHIM(int, fstatat64, (int dirfd, const char* path, void* st, int flags), (dirfd, path, st, flags))
SHIM(int, statx, (int dirfd, const char* path, int flags, unsigned mask, void* stx), (dirfd, path, flags, mask, stx))
SHIM(int, fstatfs, (int fd, void* sfs), (fd, sfs))
SHIM(int, fstatfs64, (int fd, void* sfs), (fd, sfs))
SHIM(long, lseek, (int fd, long offset, int whence), (fd, offset, whence))
SHIM(long, lseek64, (int fd, long offset, int whence), (fd, offset, whence))
SHIM(int, mkdirat, (int dirfd, const char* path, unsigned mode), (dirfd, path, mode))
SHIM(int, unlinkat, (int dirfd, const char* path, int flags), (dirfd, path, flags))
SHIM(int, linkat, (int olddirfd, const char* oldpath, int newdirfd, const char* newpath, int flags),
     (olddirfd, oldpath, newdirfd, newpath, flags))
SHIM(int, symlinkat, (const char* target, int dirfd, const char* path), (target, dirfd, path))
SHIM(long, readlinkat, (int dirfd, const char* path, char* buf, size_t size), (dirfd, path, buf, size))
SHIM(long, read, (int fd, void* buf, size_t n), (fd, buf, n))
SHIM(long, write, (int fd, const void* buf, size_t n), (fd, buf, n))
SHIM(long, pread, (int fd, void* buf, size_t n, long pos), (fd, buf, n, pos))
SHIM(long, pread64, (int fd, void* buf, size_t n, long pos), (fd, buf, n, pos))
SHIM(long, pwrite, (int fd, const void* buf, size_t n, long pos), (fd, buf, n, pos))
SHIM(long, pwrite64, (int fd, const void* buf, size_t n, long pos), (fd, buf, n, pos))
SHIM(int, ftruncate, (int fd, long length), (fd, length))
SHIM(int, ftruncate64, (int fd, long length), (fd, length))
SHIM(int, fsync, (int fd), (fd))
SHIM(int, fdatasync, (int fd), (fd))
SHIM(int, syncfs, (int fd), (fd))
SHIM(int, sync_file_range, (int fd, long offset, long nbytes, unsigned flags), (fd, offset, nbytes, flags))
SHIM(int, fchmod, (int fd, unsigned mode), (fd, mode))
SHIM(int, flock, (int fd, int op), (fd, op))
SHIM(int, futimens, (int fd, const void* times), (fd, times))
SHIM(int, utimensat, (int dirfd, const char* path, const void* times, int flags), (dirfd, path, times, flags))
SHIM(long, copy_file_range, (int in, long* offin, int out, long* offout, size_t n, unsigned flags),
     (in, offin, out, offout, n, flags))

#define OPENAT(name)                                                   \
  int name(int dirfd, const char* path, int flags, ...) {              \
    REAL(int, name, (int, const char*, int, ...));                     \
    unsigned mode = 0;                                                 \
    if (flags & (O_CREAT | __O_TMPFILE)) {                             \
      va_list ap;                                                      \
      va_start(ap, flags);                                             \
      mode = va_arg(ap, unsigned);                                     \
      va_end(ap);                                                      \
    }                                                                  \
    if (fail(#name, __builtin_return_address(0))) return -1;           \
    return real(dirfd, path, flags, mode);                             \
  }
OPENAT(openat)
OPENAT(openat64)

int ioctl(int fd, unsigned long request, ...) {
  REAL(int, ioctl, (int, unsigned long, ...));
  va_list ap;
  va_start(ap, request);
  void* arg = va_arg(ap, void*);
  va_end(ap);
  if (fail("ioctl", __builtin_return_address(0))) return -1;
  return real(fd, request, arg);
}

// openat2, getdents64, renameat2 and fchmodat2 go through syscall(2).
long syscall(long number, ...) {
  REAL(long, syscall, (long, ...));
  va_list ap;
  va_start(ap, number);
  long a = va_arg(ap, long), b = va_arg(ap, long), c = va_arg(ap, long);
  long d = va_arg(ap, long), e = va_arg(ap, long), f = va_arg(ap, long);
  va_end(ap);
  if (fail("syscall", __builtin_return_address(0))) return -1;
  return real(number, a, b, c, d, e, f);
}

int close(int fd) {
  REAL(int, close, (int));
  void* caller = __builtin_return_address(0);
  if (!from_addon(caller)) return real(fd);
  track(caller);
  int r = real(fd);
  if (r == 0 && in_a_row < setting("TREESEAL_SHIM_TIMES", 1)) {
    in_a_row++;
    count("close");
    errno = (int)setting("TREESEAL_SHIM_ERRNO", EINTR);
    return -1;
  }
  in_a_row = 0;
  return r;
}
