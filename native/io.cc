// io.cc: pread/pwrite at offsets into Buffers (position -1: the fd's own offset), lseek, ftruncate, fsync, fdatasync,
// sync_file_range, syncfs.
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include "args.h"
#include "call.h"
#include "ops.h"
#include "syserr.h"

namespace treeseal {

// A partial count comes back as it is; EINTR means nothing was read (see RetryEintr).
static ssize_t DoPread(int fd, uint8_t* buf, size_t len, int64_t pos) {
  return RetryEintr([=] { return pos < 0 ? ::read(fd, buf, len) : ::pread(fd, buf, len, static_cast<off_t>(pos)); });
}

static ssize_t DoPwrite(int fd, uint8_t* buf, size_t len, int64_t pos) {
  return RetryEintr([=] { return pos < 0 ? ::write(fd, buf, len) : ::pwrite(fd, buf, len, static_cast<off_t>(pos)); });
}

static int DoFsync(int fd) { return RetryEintr([=] { return ::fsync(fd); }); }

static int DoFdatasync(int fd) { return RetryEintr([=] { return ::fdatasync(fd); }); }

static int DoSyncFileRange(int fd, int64_t offset, int64_t nbytes, unsigned int flags) {
  return RetryEintr([=] { return ::sync_file_range(fd, static_cast<off64_t>(offset), static_cast<off64_t>(nbytes), flags); });
}

static int DoSyncfs(int fd) { return RetryEintr([=] { return ::syncfs(fd); }); }

static int64_t DoLseek(int fd, int64_t offset, int whence) {
  return RetryEintr([=] { return ::lseek(fd, static_cast<off_t>(offset), whence); });
}

static int DoFtruncate(int fd, int64_t length) { return RetryEintr([=] { return ::ftruncate(fd, static_cast<off_t>(length)); }); }

// lseek(fd, offset, whence) -> the new offset (SEEK_DATA/SEEK_HOLE past the last data: ENXIO)
static Napi::Value Lseek(const Napi::CallbackInfo& info) {
  int fd, whence;
  int64_t offset;
  if (!ArgFd(info, 0, "fd", &fd) || !ArgInt(info, 1, "offset", kOffsetRange, &offset) || !ArgInt32(info, 2, "whence", &whence))
    return info.Env().Undefined();
  int64_t r = DoLseek(fd, offset, whence);
  if (r < 0) return ThrowSys(info.Env(), static_cast<int>(-r), "lseek");
  return Napi::Number::New(info.Env(), static_cast<double>(r));
}

// sync_file_range(fd, offset, nbytes, flags): nbytes 0 is "to the end of the file"
static Napi::Value SyncFileRange(const Napi::CallbackInfo& info) {
  int fd;
  int64_t offset, nbytes;
  uint32_t flags;
  if (!ArgFd(info, 0, "fd", &fd) || !ArgInt(info, 1, "offset", kOffsetRange, &offset) ||
      !ArgInt(info, 2, "nbytes", kOffsetRange, &nbytes) || !ArgUint32(info, 3, "flags", &flags))
    return info.Env().Undefined();
  int r = DoSyncFileRange(fd, offset, nbytes, flags);
  if (r < 0) return ThrowSys(info.Env(), -r, "sync_file_range");
  return info.Env().Undefined();
}

void RegisterIo(Napi::Env env, Napi::Object exports) {
  // pread(fd, buffer, offset, length, position) -> bytes read
  exports.Set("pread", Napi::Function::New(env, [](const Napi::CallbackInfo& info) { return CallIo(info, "pread", DoPread); }, "pread"));
  // pwrite(fd, buffer, offset, length, position) -> bytes written
  exports.Set("pwrite", Napi::Function::New(env, [](const Napi::CallbackInfo& info) { return CallIo(info, "pwrite", DoPwrite); }, "pwrite"));
  exports.Set("lseek", Napi::Function::New(env, Lseek, "lseek"));
  // ftruncate(fd, length): a negative length is the kernel's EINVAL
  exports.Set("ftruncate", Napi::Function::New(env, [](const Napi::CallbackInfo& info) { return CallFdInt(info, "ftruncate", "length", kOffsetRange, DoFtruncate); }, "ftruncate"));
  exports.Set("fsync", Napi::Function::New(env, [](const Napi::CallbackInfo& info) { return CallFd(info, "fsync", DoFsync); }, "fsync"));
  exports.Set("fdatasync", Napi::Function::New(env, [](const Napi::CallbackInfo& info) { return CallFd(info, "fdatasync", DoFdatasync); }, "fdatasync"));
  exports.Set("sync_file_range", Napi::Function::New(env, SyncFileRange, "sync_file_range"));
  exports.Set("syncfs", Napi::Function::New(env, [](const Napi::CallbackInfo& info) { return CallFd(info, "syncfs", DoSyncfs); }, "syncfs"));
}

}  // namespace treeseal
