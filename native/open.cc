// open.cc: openat, openat2, close, close_range and pipe2.
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "args.h"
#include "call.h"
#include "ops.h"
#include "syserr.h"

#ifndef SYS_openat2
#define SYS_openat2 437
#endif
#ifndef SYS_close_range
#define SYS_close_range 436
#endif

namespace treeseal {

static int DoOpenat(int dirfd, const char* path, int flags, mode_t mode) {
  return RetryEintr([=] { return ::openat(dirfd, path, flags | O_CLOEXEC, mode); });
}

static int DoOpenat2(int dirfd, const char* path, int flags, mode_t mode, uint64_t resolve) {
  struct open_how how = {};
  how.flags = static_cast<uint64_t>(static_cast<unsigned>(flags | O_CLOEXEC));
  // The kernel refuses a mode without O_CREAT/O_TMPFILE.
  how.mode = (flags & (O_CREAT | __O_TMPFILE)) ? mode : 0;
  how.resolve = resolve;
  long fd = RetryEintr([&] { return ::syscall(SYS_openat2, dirfd, path, &how, sizeof how); });
  return static_cast<int>(fd);  // an fd or -errno: both fit an int
}

// Never retried (see RetryEintr in ops.h): on Linux the fd is released even when close
// reports EINTR, so EINTR counts as done.
static int DoClose(int fd) { return ::close(fd) < 0 && errno != EINTR ? -errno : 0; }

// close_range(first, last, flags): with CLOSE_RANGE_CLOEXEC the range is marked close-on-exec, not closed.
static Napi::Value CloseRange(const Napi::CallbackInfo& info) {
  uint32_t first, last, flags;
  if (!ArgUint32(info, 0, "first", &first) || !ArgUint32(info, 1, "last", &last) || !ArgUint32(info, 2, "flags", &flags))
    return info.Env().Undefined();
  if (::syscall(SYS_close_range, first, last, flags) < 0) return ThrowSys(info.Env(), errno, "close_range");
  return info.Env().Undefined();
}

// pipe2(flags) -> [readFd, writeFd], always close-on-exec (a spawn hands the write end over by dup2, which clears it).
static Napi::Value Pipe2(const Napi::CallbackInfo& info) {
  int flags;
  if (!ArgInt32(info, 0, "flags", &flags)) return info.Env().Undefined();
  int fds[2];
  if (::pipe2(fds, flags | O_CLOEXEC) < 0) return ThrowSys(info.Env(), errno, "pipe2");
  Napi::Array out = Napi::Array::New(info.Env(), 2);
  out.Set(0u, Napi::Number::New(info.Env(), fds[0]));
  out.Set(1u, Napi::Number::New(info.Env(), fds[1]));
  return out;
}

// openat(dirfd, path, flags, mode) -> fd
static Napi::Value Openat(const Napi::CallbackInfo& info) {
  int dirfd, flags;
  uint32_t mode = 0;
  std::string path;
  if (!ArgDirFd(info, 0, "dirfd", &dirfd) || !ArgPath(info, 1, "path", &path) || !ArgInt32(info, 2, "flags", &flags))
    return info.Env().Undefined();
  if (info.Length() > 3 && !info[3].IsUndefined() && !ArgUint32(info, 3, "mode", &mode)) return info.Env().Undefined();
  int r = DoOpenat(dirfd, path.c_str(), flags, static_cast<mode_t>(mode));
  if (r < 0) return ThrowSys(info.Env(), -r, "openat", &path);
  return Napi::Number::New(info.Env(), r);
}

// openat2(dirfd, path, flags, mode, resolve) -> fd
static Napi::Value Openat2(const Napi::CallbackInfo& info) {
  int dirfd, flags;
  uint32_t mode;
  int64_t resolve;
  std::string path;
  if (!ArgDirFd(info, 0, "dirfd", &dirfd) || !ArgPath(info, 1, "path", &path) || !ArgInt32(info, 2, "flags", &flags) ||
      !ArgUint32(info, 3, "mode", &mode) || !ArgInt(info, 4, "resolve", kCountRange, &resolve))
    return info.Env().Undefined();
  int r = DoOpenat2(dirfd, path.c_str(), flags, static_cast<mode_t>(mode), static_cast<uint64_t>(resolve));
  if (r < 0) return ThrowSys(info.Env(), -r, "openat2", &path);
  return Napi::Number::New(info.Env(), r);
}

void RegisterOpen(Napi::Env env, Napi::Object exports) {
  exports.Set("openat", Napi::Function::New(env, Openat, "openat"));
  exports.Set("openat2", Napi::Function::New(env, Openat2, "openat2"));
  // close(fd): never retried on EINTR (the fd is gone either way on Linux)
  exports.Set("close", Napi::Function::New(env, [](const Napi::CallbackInfo& info) { return CallFd(info, "close", DoClose); }, "close"));
  exports.Set("close_range", Napi::Function::New(env, CloseRange, "close_range"));
  exports.Set("pipe2", Napi::Function::New(env, Pipe2, "pipe2"));
}

}  // namespace treeseal
