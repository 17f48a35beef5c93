// call.cc: argument reading and error raising for the shared wrapper shapes of call.h.
#include "call.h"

#include <string>

#include "syserr.h"

namespace treeseal {

Napi::Value CallFd(const Napi::CallbackInfo& info, const char* syscall, int (*op)(int)) {
  int fd;
  if (!ArgFd(info, 0, "fd", &fd)) return info.Env().Undefined();
  int r = op(fd);
  if (r < 0) return ThrowSys(info.Env(), -r, syscall);
  return info.Env().Undefined();
}

Napi::Value CallFdInt(const Napi::CallbackInfo& info, const char* syscall, const char* arg, IntRange range,
                      int (*op)(int, int64_t)) {
  int fd;
  int64_t value;
  if (!ArgFd(info, 0, "fd", &fd) || !ArgInt(info, 1, arg, range, &value)) return info.Env().Undefined();
  int r = op(fd, value);
  if (r < 0) return ThrowSys(info.Env(), -r, syscall);
  return info.Env().Undefined();
}

Napi::Value CallAtPathInt(const Napi::CallbackInfo& info, const char* syscall, const char* arg, IntRange range,
                          int (*op)(int, const char*, int64_t)) {
  int dirfd;
  int64_t value;
  std::string path;
  if (!ArgDirFd(info, 0, "dirfd", &dirfd) || !ArgPath(info, 1, "path", &path) || !ArgInt(info, 2, arg, range, &value))
    return info.Env().Undefined();
  int r = op(dirfd, path.c_str(), value);
  if (r < 0) return ThrowSys(info.Env(), -r, syscall, &path);
  return info.Env().Undefined();
}

Napi::Value CallIo(const Napi::CallbackInfo& info, const char* syscall, ssize_t (*op)(int, uint8_t*, size_t, int64_t)) {
  int fd;
  int64_t offset, length, position;
  uint8_t* data;
  size_t size;
  if (!ArgFd(info, 0, "fd", &fd) || !ArgBuffer(info, 1, "buffer", &data, &size) ||
      !ArgInt(info, 2, "offset", kCountRange, &offset) || !ArgInt(info, 3, "length", kCountRange, &length) ||
      !ArgInt(info, 4, "position", kPositionRange, &position))
    return info.Env().Undefined();
  // node:fs's words for a slice that does not fit the buffer.
  uint64_t bytes = size;
  if (static_cast<uint64_t>(offset) > bytes) {
    OutOfRange(info.Env(), "offset", ">= 0 && <= " + std::to_string(bytes), IntegerText(offset));
    return info.Env().Undefined();
  }
  if (static_cast<uint64_t>(length) > bytes - static_cast<uint64_t>(offset)) {
    OutOfRange(info.Env(), "length", "<= " + std::to_string(bytes - static_cast<uint64_t>(offset)), IntegerText(length));
    return info.Env().Undefined();
  }
  ssize_t n = op(fd, data + offset, static_cast<size_t>(length), position);
  if (n < 0) return ThrowSys(info.Env(), static_cast<int>(-n), syscall);
  return Napi::Number::New(info.Env(), static_cast<double>(n));
}

}  // namespace treeseal
