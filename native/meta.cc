// meta.cc: fchmod, fchmodat (fchmodat2 for its flags: never following a link), fchown, fchownat, futimens, utimensat and flock.
#include <errno.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef SYS_fchmodat2
#define SYS_fchmodat2 452
#endif

#include "args.h"
#include "call.h"
#include "ops.h"
#include "syserr.h"

namespace treeseal {

// mode is read as a uint32 (mode_t), the flock operation as an int32 (kUint32Range, kInt32Range below).
static int DoFchmod(int fd, int64_t mode) { return RetryEintr([=] { return ::fchmod(fd, static_cast<mode_t>(mode)); }); }

// No flags: the fchmodat syscall every kernel has; flags (AT_SYMLINK_NOFOLLOW, AT_EMPTY_PATH): fchmodat2 (6.6+).
static int DoFchmodat(int dirfd, const char* path, mode_t mode, int flags) {
  if (flags == 0) return RetryEintr([=] { return ::fchmodat(dirfd, path, mode, 0); });
  return static_cast<int>(RetryEintr([=] { return ::syscall(SYS_fchmodat2, dirfd, path, mode, flags); }));
}

static int DoFchown(int fd, uid_t uid, gid_t gid) { return RetryEintr([=] { return ::fchown(fd, uid, gid); }); }

static int DoFchownat(int dirfd, const char* path, uid_t uid, gid_t gid, int flags) {
  return RetryEintr([=] { return ::fchownat(dirfd, path, uid, gid, flags); });
}

static int DoFlock(int fd, int64_t op) { return RetryEintr([=] { return ::flock(fd, static_cast<int>(op)); }); }

static int DoFutimens(int fd, const struct timespec* times) { return RetryEintr([=] { return ::futimens(fd, times); }); }

static int DoUtimensat(int dirfd, const char* path, const struct timespec* times, int flags) {
  return RetryEintr([=] { return ::utimensat(dirfd, path, times, flags); });
}

static_assert(UTIME_OMIT >= kNanosecondsRange.min && UTIME_OMIT <= kNanosecondsRange.max && UTIME_NOW >= kNanosecondsRange.min &&
                  UTIME_NOW <= kNanosecondsRange.max,
              "UTIME_OMIT and UTIME_NOW are nanosecond values the range takes");

// The access and modification times from four arguments starting at `first`: atimeSec, atimeNsec,
// mtimeSec, mtimeNsec, each read within its range before it becomes a time_t or a long.
static bool ArgTimes(const Napi::CallbackInfo& info, size_t first, struct timespec times[2]) {
  int64_t v[4];
  if (!ArgInt(info, first, "atimeSec", kSecondsRange, &v[0]) || !ArgInt(info, first + 1, "atimeNsec", kNanosecondsRange, &v[1]) ||
      !ArgInt(info, first + 2, "mtimeSec", kSecondsRange, &v[2]) || !ArgInt(info, first + 3, "mtimeNsec", kNanosecondsRange, &v[3]))
    return false;
  for (int i = 0; i < 2; i++) {
    times[i].tv_sec = static_cast<time_t>(v[2 * i]);
    times[i].tv_nsec = static_cast<long>(v[2 * i + 1]);
  }
  return true;
}

// futimens(fd, atimeSec, atimeNsec, mtimeSec, mtimeNsec): a nanosecond value of UTIME_OMIT leaves that time, UTIME_NOW sets it to now
static Napi::Value Futimens(const Napi::CallbackInfo& info) {
  int fd;
  struct timespec times[2];
  if (!ArgFd(info, 0, "fd", &fd) || !ArgTimes(info, 1, times)) return info.Env().Undefined();
  int r = DoFutimens(fd, times);
  if (r < 0) return ThrowSys(info.Env(), -r, "futimens");
  return info.Env().Undefined();
}

// utimensat(dirfd, path, atimeSec, atimeNsec, mtimeSec, mtimeNsec, flags): with AT_SYMLINK_NOFOLLOW a link's own times are set
static Napi::Value Utimensat(const Napi::CallbackInfo& info) {
  int dirfd, flags;
  std::string path;
  struct timespec times[2];
  if (!ArgDirFd(info, 0, "dirfd", &dirfd) || !ArgPath(info, 1, "path", &path) || !ArgTimes(info, 2, times) ||
      !ArgInt32(info, 6, "flags", &flags))
    return info.Env().Undefined();
  int r = DoUtimensat(dirfd, path.c_str(), times, flags);
  if (r < 0) return ThrowSys(info.Env(), -r, "utimensat", &path);
  return info.Env().Undefined();
}

// fchown(fd, uid, gid): uid or gid 4294967295 ((uid_t)-1) leaves that one as it is
static Napi::Value Fchown(const Napi::CallbackInfo& info) {
  int fd;
  uint32_t uid, gid;
  if (!ArgFd(info, 0, "fd", &fd) || !ArgUint32(info, 1, "uid", &uid) || !ArgUint32(info, 2, "gid", &gid)) return info.Env().Undefined();
  int r = DoFchown(fd, static_cast<uid_t>(uid), static_cast<gid_t>(gid));
  if (r < 0) return ThrowSys(info.Env(), -r, "fchown");
  return info.Env().Undefined();
}

// fchownat(dirfd, path, uid, gid, flags): with AT_SYMLINK_NOFOLLOW a link's own owner is set; uid or gid 4294967295 leaves that one
static Napi::Value Fchownat(const Napi::CallbackInfo& info) {
  int dirfd, flags;
  uint32_t uid, gid;
  std::string path;
  if (!ArgDirFd(info, 0, "dirfd", &dirfd) || !ArgPath(info, 1, "path", &path) || !ArgUint32(info, 2, "uid", &uid) ||
      !ArgUint32(info, 3, "gid", &gid) || !ArgInt32(info, 4, "flags", &flags))
    return info.Env().Undefined();
  int r = DoFchownat(dirfd, path.c_str(), static_cast<uid_t>(uid), static_cast<gid_t>(gid), flags);
  if (r < 0) return ThrowSys(info.Env(), -r, "fchownat", &path);
  return info.Env().Undefined();
}

// fchmodat(dirfd, path, mode, flags): AT_SYMLINK_NOFOLLOW and AT_EMPTY_PATH are honoured (ENOSYS on kernels before 6.6); no flags works everywhere
static Napi::Value Fchmodat(const Napi::CallbackInfo& info) {
  int dirfd, flags;
  uint32_t mode;
  std::string path;
  if (!ArgDirFd(info, 0, "dirfd", &dirfd) || !ArgPath(info, 1, "path", &path) || !ArgUint32(info, 2, "mode", &mode) ||
      !ArgInt32(info, 3, "flags", &flags))
    return info.Env().Undefined();
  int r = DoFchmodat(dirfd, path.c_str(), static_cast<mode_t>(mode), flags);
  if (r < 0) return ThrowSys(info.Env(), -r, "fchmodat", &path);
  return info.Env().Undefined();
}

void RegisterMeta(Napi::Env env, Napi::Object exports) {
  // fchmod(fd, mode)
  exports.Set("fchmod", Napi::Function::New(env, [](const Napi::CallbackInfo& info) { return CallFdInt(info, "fchmod", "mode", kUint32Range, DoFchmod); }, "fchmod"));
  exports.Set("fchmodat", Napi::Function::New(env, Fchmodat, "fchmodat"));
  exports.Set("fchown", Napi::Function::New(env, Fchown, "fchown"));
  exports.Set("fchownat", Napi::Function::New(env, Fchownat, "fchownat"));
  exports.Set("futimens", Napi::Function::New(env, Futimens, "futimens"));
  exports.Set("utimensat", Napi::Function::New(env, Utimensat, "utimensat"));
  // flock(fd, operation)
  exports.Set("flock", Napi::Function::New(env, [](const Napi::CallbackInfo& info) { return CallFdInt(info, "flock", "operation", kInt32Range, DoFlock); }, "flock"));
}

}  // namespace treeseal
