// call.cc: argument reading and error raising for the shared wrapper shapes of call.h.
#include "call.h"

#include "args.h"
#include "syserr.h"

namespace treeseal {

Napi::Value CallFd(const Napi::CallbackInfo& info, const char* syscall, int (*op)(int)) {
  int64_t fd;
  if (!ArgInt(info, 0, "fd", &fd)) return info.Env().Undefined();
  int r = op(static_cast<int>(fd));
  if (r < 0) return ThrowSys(info.Env(), -r, syscall);
  return info.Env().Undefined();
}

Napi::Value CallFdInt(const Napi::CallbackInfo& info, const char* syscall, const char* arg, int (*op)(int, int64_t)) {
  int64_t fd, value;
  if (!ArgInt(info, 0, "fd", &fd) || !ArgInt(info, 1, arg, &value)) return info.Env().Undefined();
  int r = op(static_cast<int>(fd), value);
  if (r < 0) return ThrowSys(info.Env(), -r, syscall);
  return info.Env().Undefined();
}

Napi::Value CallAtPathInt(const Napi::CallbackInfo& info, const char* syscall, const char* arg,
                          int (*op)(int, const char*, int64_t)) {
  int64_t dirfd, value;
  std::string path;
  if (!ArgInt(info, 0, "dirfd", &dirfd) || !ArgPath(info, 1, "path", &path) || !ArgInt(info, 2, arg, &value))
    return info.Env().Undefined();
  int r = op(static_cast<int>(dirfd), path.c_str(), value);
  if (r < 0) return ThrowSys(info.Env(), -r, syscall, &path);
  return info.Env().Undefined();
}

Napi::Value CallIo(const Napi::CallbackInfo& info, const char* syscall, ssize_t (*op)(int, uint8_t*, size_t, int64_t)) {
  int64_t fd, offset, length, position;
  uint8_t* data;
  size_t size;
  if (!ArgInt(info, 0, "fd", &fd) || !ArgBuffer(info, 1, "buffer", &data, &size) ||
      !ArgInt(info, 2, "offset", &offset) || !ArgInt(info, 3, "length", &length) ||
      !ArgInt(info, 4, "position", &position))
    return info.Env().Undefined();
  if (offset < 0 || length < 0 || static_cast<uint64_t>(offset) + static_cast<uint64_t>(length) > size) {
    return ThrowArg(info.Env(), "ERR_OUT_OF_RANGE", "offset and length must lie inside the buffer");
  }
  ssize_t n = op(static_cast<int>(fd), data + offset, static_cast<size_t>(length), position);
  if (n < 0) return ThrowSys(info.Env(), static_cast<int>(-n), syscall);
  return Napi::Number::New(info.Env(), static_cast<double>(n));
}

}  // namespace treeseal
