// io.cc: pread/pwrite at offsets into Buffers (position -1: the fd's own offset), fsync, syncfs.
#include <errno.h>
#include <unistd.h>

#include "call.h"
#include "ops.h"

namespace treeseal {

static ssize_t DoPread(int fd, uint8_t* buf, size_t len, int64_t pos) {
  ssize_t n;
  do n = pos < 0 ? ::read(fd, buf, len) : ::pread(fd, buf, len, pos);
  while (n < 0 && errno == EINTR);
  return n < 0 ? -errno : n;
}

static ssize_t DoPwrite(int fd, uint8_t* buf, size_t len, int64_t pos) {
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

void RegisterIo(Napi::Env env, Napi::Object exports) {
  // pread(fd, buffer, offset, length, position) -> bytes read
  exports.Set("pread", Napi::Function::New(env, [](const Napi::CallbackInfo& info) { return CallIo(info, "pread", DoPread); }, "pread"));
  // pwrite(fd, buffer, offset, length, position) -> bytes written
  exports.Set("pwrite", Napi::Function::New(env, [](const Napi::CallbackInfo& info) { return CallIo(info, "pwrite", DoPwrite); }, "pwrite"));
  exports.Set("fsync", Napi::Function::New(env, [](const Napi::CallbackInfo& info) { return CallFd(info, "fsync", DoFsync); }, "fsync"));
  exports.Set("syncfs", Napi::Function::New(env, [](const Napi::CallbackInfo& info) { return CallFd(info, "syncfs", DoSyncfs); }, "syncfs"));
}

}  // namespace treeseal
