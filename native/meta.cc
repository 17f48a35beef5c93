// meta.cc: fchmod, fchmodat (fchmodat2, never following a link) and flock.
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

static int DoFchmodat(int dirfd, const char* path, mode_t mode, int flags) {
  return static_cast<int>(RetryEintr([=] { return ::syscall(SYS_fchmodat2, dirfd, path, mode, flags); }));
}

static int DoFlock(int fd, int64_t op) { return RetryEintr([=] { return ::flock(fd, static_cast<int>(op)); }); }

// fchmodat(dirfd, path, mode, flags): AT_SYMLINK_NOFOLLOW is honoured (ENOSYS on kernels before 6.6)
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
  // flock(fd, operation)
  exports.Set("flock", Napi::Function::New(env, [](const Napi::CallbackInfo& info) { return CallFdInt(info, "flock", "operation", kInt32Range, DoFlock); }, "flock"));
}

}  // namespace treeseal
