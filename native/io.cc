// io.cc: pread/pwrite at offsets into Buffers (position -1: the fd's own offset), fsync, syncfs.
#include <errno.h>
#include <unistd.h>

#include "args.h"
#include "ops.h"
#include "syserr.h"

namespace treeseal {

static ssize_t DoPread(int fd, void* buf, size_t len, int64_t pos) {
  ssize_t n;
  do n = pos < 0 ? ::read(fd, buf, len) : ::pread(fd, buf, len, pos);
  while (n < 0 && errno == EINTR);
  return n < 0 ? -errno : n;
}

static ssize_t DoPwrite(int fd, const void* buf, size_t len, int64_t pos) {
  ssize_t n;
  do n = pos < 0 ? ::write(fd, buf, len) : ::pwrite(fd, buf, len, pos);
  while (n < 0 && errno == EINTR);
  return n < 0 ? -errno : n;
}

static int DoFsync(int fd) {
  int r;
  do r = ::fsync(fd);
  while (r < 0 && errno == EINTR);
  return r < 0 ? -errno : 0;
}

static int DoSyncfs(int fd) { return ::syncfs(fd) < 0 ? -errno : 0; }

// Reads (fd, buffer, offset, length, position) and checks the window lies inside the buffer.
static bool IoArgs(const Napi::CallbackInfo& info, int64_t* fd, uint8_t** data, int64_t* offset, int64_t* length,
                   int64_t* position) {
  size_t size;
  if (!ArgInt(info, 0, "fd", fd) || !ArgBuffer(info, 1, "buffer", data, &size) ||
      !ArgInt(info, 2, "offset", offset) || !ArgInt(info, 3, "length", length) ||
      !ArgInt(info, 4, "position", position))
    return false;
  if (*offset < 0 || *length < 0 || static_cast<uint64_t>(*offset) + static_cast<uint64_t>(*length) > size) {
    ThrowArg(info.Env(), "ERR_OUT_OF_RANGE", "offset and length must lie inside the buffer");
    return false;
  }
  return true;
}

// pread(fd, buffer, offset, length, position) -> bytes read
static Napi::Value Pread(const Napi::CallbackInfo& info) {
  int64_t fd, offset, length, position;
  uint8_t* data;
  if (!IoArgs(info, &fd, &data, &offset, &length, &position)) return info.Env().Undefined();
  ssize_t n = DoPread(static_cast<int>(fd), data + offset, static_cast<size_t>(length), position);
  if (n < 0) return ThrowSys(info.Env(), static_cast<int>(-n), position < 0 ? "read" : "pread");
  return Napi::Number::New(info.Env(), static_cast<double>(n));
}

// pwrite(fd, buffer, offset, length, position) -> bytes written
static Napi::Value Pwrite(const Napi::CallbackInfo& info) {
  int64_t fd, offset, length, position;
  uint8_t* data;
  if (!IoArgs(info, &fd, &data, &offset, &length, &position)) return info.Env().Undefined();
  ssize_t n = DoPwrite(static_cast<int>(fd), data + offset, static_cast<size_t>(length), position);
  if (n < 0) return ThrowSys(info.Env(), static_cast<int>(-n), position < 0 ? "write" : "pwrite");
  return Napi::Number::New(info.Env(), static_cast<double>(n));
}

// fsync(fd)
static Napi::Value Fsync(const Napi::CallbackInfo& info) {
  int64_t fd;
  if (!ArgInt(info, 0, "fd", &fd)) return info.Env().Undefined();
  int r = DoFsync(static_cast<int>(fd));
  if (r < 0) return ThrowSys(info.Env(), -r, "fsync");
  return info.Env().Undefined();
}

// syncfs(fd)
static Napi::Value Syncfs(const Napi::CallbackInfo& info) {
  int64_t fd;
  if (!ArgInt(info, 0, "fd", &fd)) return info.Env().Undefined();
  int r = DoSyncfs(static_cast<int>(fd));
  if (r < 0) return ThrowSys(info.Env(), -r, "syncfs");
  return info.Env().Undefined();
}

void RegisterIo(Napi::Env env, Napi::Object exports) {
  exports.Set("pread", Napi::Function::New(env, Pread, "pread"));
  exports.Set("pwrite", Napi::Function::New(env, Pwrite, "pwrite"));
  exports.Set("fsync", Napi::Function::New(env, Fsync, "fsync"));
  exports.Set("syncfs", Napi::Function::New(env, Syncfs, "syncfs"));
}

}  // namespace treeseal
