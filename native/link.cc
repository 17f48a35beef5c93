// link.cc: linkat, symlinkat and readlinkat (targets that are not UTF-8 come back as Buffers).
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include <vector>

#include "args.h"
#include "ops.h"
#include "syserr.h"

namespace treeseal {

static int DoLinkat(int olddirfd, const char* oldpath, int newdirfd, const char* newpath, int flags) {
  return RetryEintr([=] { return ::linkat(olddirfd, oldpath, newdirfd, newpath, flags); });
}

static int DoSymlinkat(const char* target, int dirfd, const char* path) {
  return RetryEintr([=] { return ::symlinkat(target, dirfd, path); });
}

static ssize_t DoReadlinkat(int dirfd, const char* path, std::vector<char>* out) {
  for (size_t size = 4097;; size *= 2) {
    out->resize(size);
    ssize_t n = RetryEintr([=] { return ::readlinkat(dirfd, path, out->data(), size); });
    if (n < 0) return n;
    if (static_cast<size_t>(n) < size) return n;
  }
}

// linkat(olddirfd, oldpath, newdirfd, newpath, flags)
static Napi::Value Linkat(const Napi::CallbackInfo& info) {
  int olddirfd, newdirfd, flags;
  std::string oldpath, newpath;
  if (!ArgDirFd(info, 0, "olddirfd", &olddirfd) || !ArgPath(info, 1, "oldpath", &oldpath) || !ArgDirFd(info, 2, "newdirfd", &newdirfd) ||
      !ArgPath(info, 3, "newpath", &newpath) || !ArgInt32(info, 4, "flags", &flags))
    return info.Env().Undefined();
  int r = DoLinkat(olddirfd, oldpath.c_str(), newdirfd, newpath.c_str(), flags);
  if (r < 0) return ThrowSys(info.Env(), -r, "linkat", &oldpath, &newpath);
  return info.Env().Undefined();
}

// symlinkat(target, dirfd, path)
static Napi::Value Symlinkat(const Napi::CallbackInfo& info) {
  int dirfd;
  std::string target, path;
  if (!ArgPath(info, 0, "target", &target) || !ArgDirFd(info, 1, "dirfd", &dirfd) || !ArgPath(info, 2, "path", &path))
    return info.Env().Undefined();
  int r = DoSymlinkat(target.c_str(), dirfd, path.c_str());
  if (r < 0) return ThrowSys(info.Env(), -r, "symlinkat", &target, &path);
  return info.Env().Undefined();
}

// readlinkat(dirfd, path) -> string | Buffer
static Napi::Value Readlinkat(const Napi::CallbackInfo& info) {
  int dirfd;
  std::string path;
  if (!ArgDirFd(info, 0, "dirfd", &dirfd) || !ArgPath(info, 1, "path", &path)) return info.Env().Undefined();
  std::vector<char> buf;
  ssize_t n = DoReadlinkat(dirfd, path.c_str(), &buf);
  if (n < 0) return ThrowSys(info.Env(), static_cast<int>(-n), "readlinkat", &path);
  return NameValue(info.Env(), buf.data(), static_cast<size_t>(n));
}

void RegisterLink(Napi::Env env, Napi::Object exports) {
  exports.Set("linkat", Napi::Function::New(env, Linkat, "linkat"));
  exports.Set("symlinkat", Napi::Function::New(env, Symlinkat, "symlinkat"));
  exports.Set("readlinkat", Napi::Function::New(env, Readlinkat, "readlinkat"));
}

}  // namespace treeseal
