// stat.cc: fstat and fstatat, filling a caller-owned stat block (fstatat_each: one block per name, in one call); statx for inode attributes; fstatfs for the filesystem type.
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>

#include <cstdint>
#include <cstring>
#include <string>

#include "args.h"
#include "ops.h"
#include "syserr.h"

namespace treeseal {

static int DoFstat(int fd, struct stat* st) { return RetryEintr([=] { return ::fstat(fd, st); }); }

static int DoFstatat(int dirfd, const char* path, struct stat* st, int flags) {
  return RetryEintr([=] { return ::fstatat(dirfd, path, st, flags); });
}

// The stat block the JS side reads (`block` in src/sys/native.ts): ten 8-byte slots in host
// byte order: dev and ino as uint64, mtime and ctime as int64 nanoseconds, then mode, nlink,
// uid, gid, size and blocks as doubles. Filled in place, so a stat costs no object or BigInt
// on this side. The block is a byte buffer: each slot is copied in with memcpy, so it needs
// no alignment and no value is written through a pointer of another type.
static const size_t kStatSlots = 10;
static const size_t kStatBytes = kStatSlots * 8;

template <typename T>
static void PutSlot(uint8_t* block, size_t slot, T value) {
  static_assert(sizeof(T) == 8, "every slot of the stat block is 8 bytes");
  memcpy(block + slot * 8, &value, sizeof value);
}

static bool ArgStatBlock(const Napi::CallbackInfo& info, size_t i, uint8_t** out) {
  size_t len;
  if (!ArgBuffer(info, i, "out", out, &len)) return false;
  if (len < kStatBytes) return OutOfRange(info.Env(), "out.byteLength", ">= " + std::to_string(kStatBytes), std::to_string(len));
  return true;
}

// The largest time a slot holds, either way: 2^63 - 1 nanoseconds from the epoch (2262-04-11,
// 1677-09-21). INT64_MIN stays out of reach: the JS side keeps it for "no time".
static const int64_t kMaxNanoseconds = INT64_MAX;

// Nanoseconds since the epoch, held at +/- kMaxNanoseconds for a time past them (before
// 1677 or after 2262, which ext4, XFS with bigtime, btrfs and tmpfs can store): such a time
// is set by hand (utimensat), never by the kernel's clock at a change, which sets the
// ctime too, so the identity a stat gives still tells every change apart.
static int64_t Nanoseconds(const struct timespec& ts) {
  int64_t ns;
  if (__builtin_mul_overflow(static_cast<int64_t>(ts.tv_sec), int64_t{1000000000}, &ns) ||
      __builtin_add_overflow(ns, static_cast<int64_t>(ts.tv_nsec), &ns) || ns < -kMaxNanoseconds) {
    return ts.tv_sec < 0 ? -kMaxNanoseconds : kMaxNanoseconds;
  }
  return ns;
}

// Fills the block: every slot, a time held as Nanoseconds says.
static void FillStat(uint8_t* out, const struct stat& st) {
  int64_t mtime = Nanoseconds(st.st_mtim);
  int64_t ctime = Nanoseconds(st.st_ctim);
  PutSlot(out, 0, static_cast<uint64_t>(st.st_dev));
  PutSlot(out, 1, static_cast<uint64_t>(st.st_ino));
  PutSlot(out, 2, mtime);
  PutSlot(out, 3, ctime);
  PutSlot(out, 4, static_cast<double>(st.st_mode));
  PutSlot(out, 5, static_cast<double>(st.st_nlink));
  PutSlot(out, 6, static_cast<double>(st.st_uid));
  PutSlot(out, 7, static_cast<double>(st.st_gid));
  PutSlot(out, 8, static_cast<double>(st.st_size));
  PutSlot(out, 9, static_cast<double>(st.st_blocks));
  static_assert(kStatSlots == 10, "FillStat writes every slot");
}

// fstat(fd, out) -> undefined; the stat block filled
static Napi::Value Fstat(const Napi::CallbackInfo& info) {
  int fd;
  uint8_t* out;
  if (!ArgFd(info, 0, "fd", &fd) || !ArgStatBlock(info, 1, &out)) return info.Env().Undefined();
  struct stat st;
  int r = DoFstat(fd, &st);
  if (r == 0) FillStat(out, st);
  if (r < 0) return ThrowSys(info.Env(), -r, "fstat");
  return info.Env().Undefined();
}

// fstatat(dirfd, path, flags, out) -> undefined; the stat block filled
static Napi::Value Fstatat(const Napi::CallbackInfo& info) {
  int dirfd, flags;
  std::string path;
  uint8_t* out;
  if (!ArgDirFd(info, 0, "dirfd", &dirfd) || !ArgPath(info, 1, "path", &path) || !ArgInt32(info, 2, "flags", &flags) ||
      !ArgStatBlock(info, 3, &out))
    return info.Env().Undefined();
  struct stat st;
  int r = DoFstatat(dirfd, path.c_str(), &st, flags);
  if (r == 0) FillStat(out, st);
  if (r < 0) return ThrowSys(info.Env(), -r, "fstatat", &path);
  return info.Env().Undefined();
}

// fstatat_each(dirfd, names, flags, out) -> [[index, errno], ...]: fstatat(dirfd, name, flags) of
// each name of `names` (joined by '/', which no name can hold) in turn, block i of `out` filled
// for name i; the names that failed, with their errno, are returned (their blocks untouched).
// One call for a directory's names: the syscalls run back to back, nothing between them.
static Napi::Value FstatatEach(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  int dirfd, flags;
  std::string names;
  uint8_t* out;
  size_t len;
  if (!ArgDirFd(info, 0, "dirfd", &dirfd) || !ArgPath(info, 1, "names", &names) || !ArgInt32(info, 2, "flags", &flags) ||
      !ArgBuffer(info, 3, "out", &out, &len))
    return env.Undefined();
  size_t count = names.empty() ? 0 : 1;
  for (char c : names) count += c == '/' ? 1 : 0;
  if (len < count * kStatBytes) {
    OutOfRange(env, "out.byteLength", ">= " + std::to_string(count * kStatBytes), std::to_string(len));
    return env.Undefined();
  }
  Napi::Array failed = Napi::Array::New(env);
  uint32_t nfailed = 0;
  size_t start = 0;
  for (size_t i = 0; i < count; i++) {
    size_t end = names.find('/', start);
    if (end == std::string::npos) end = names.size();
    if (end == start) return ThrowArg(env, "ERR_INVALID_ARG_VALUE", "The argument 'names' must not hold an empty name");
    names[end] = '\0';
    struct stat st;
    int r = DoFstatat(dirfd, names.c_str() + start, &st, flags);
    if (r == 0) FillStat(out + i * kStatBytes, st);
    if (r < 0) {
      Napi::Array pair = Napi::Array::New(env, 2);
      pair.Set(0u, Napi::Number::New(env, static_cast<double>(i)));
      pair.Set(1u, Napi::Number::New(env, -r));
      failed.Set(nfailed++, pair);
    }
    start = end + 1;
  }
  return failed;
}

#ifndef STATX_MNT_ID
#define STATX_MNT_ID 0x00001000U
#endif
static_assert(sizeof(struct statx) == 256, "struct statx is the kernel's 256 bytes");

static int DoStatx(int dirfd, const char* path, int flags, struct statx* stx) {
  return RetryEintr([=] { return ::statx(dirfd, path, flags, STATX_TYPE | STATX_MODE | STATX_UID | STATX_MNT_ID, stx); });
}

// statx(dirfd, path, flags) -> { mode, uid, attributes, attributesMask, mntId }: the inode
// attributes (STATX_ATTR_IMMUTABLE, STATX_ATTR_APPEND, ...) and the mount's ID that fstatat does
// not report; mntId -1 where the kernel gives none (before 5.8).
static Napi::Value Statx(const Napi::CallbackInfo& info) {
  int dirfd, flags;
  std::string path;
  if (!ArgDirFd(info, 0, "dirfd", &dirfd) || !ArgPath(info, 1, "path", &path) || !ArgInt32(info, 2, "flags", &flags))
    return info.Env().Undefined();
  struct statx stx = {};
  int r = DoStatx(dirfd, path.c_str(), flags, &stx);
  if (r < 0) return ThrowSys(info.Env(), -r, "statx", &path);
  Napi::Object o = Napi::Object::New(info.Env());
  o.Set("mode", Napi::Number::New(info.Env(), stx.stx_mode));
  o.Set("uid", Napi::Number::New(info.Env(), stx.stx_uid));
  o.Set("attributes", Napi::Number::New(info.Env(), static_cast<double>(stx.stx_attributes)));
  o.Set("attributesMask", Napi::Number::New(info.Env(), static_cast<double>(stx.stx_attributes_mask)));
  // stx_mnt_id by its place in the kernel's struct (after stx_dev_minor, 144 bytes in): a C
  // library's struct statx from before 5.8's headers has spare bytes there, and no such name.
  uint64_t mnt_id = 0;
  std::memcpy(&mnt_id, reinterpret_cast<const char*>(&stx) + 144, sizeof mnt_id);
  o.Set("mntId", Napi::Number::New(info.Env(), (stx.stx_mask & STATX_MNT_ID) ? static_cast<double>(mnt_id) : -1.0));
  return o;
}

static int64_t DoFstatfs(int fd) {
  struct statfs sfs;
  int r = RetryEintr([&] { return ::fstatfs(fd, &sfs); });
  return r < 0 ? r : static_cast<int64_t>(static_cast<uint32_t>(sfs.f_type));
}

// fstatfs(fd) -> f_type, the filesystem's magic number (TMPFS_MAGIC, EXT4_SUPER_MAGIC, ...)
static Napi::Value Fstatfs(const Napi::CallbackInfo& info) {
  int fd;
  if (!ArgFd(info, 0, "fd", &fd)) return info.Env().Undefined();
  int64_t r = DoFstatfs(fd);
  if (r < 0) return ThrowSys(info.Env(), static_cast<int>(-r), "fstatfs");
  return Napi::Number::New(info.Env(), static_cast<double>(r));
}

void RegisterStat(Napi::Env env, Napi::Object exports) {
  exports.Set("fstat", Napi::Function::New(env, Fstat, "fstat"));
  exports.Set("fstatat", Napi::Function::New(env, Fstatat, "fstatat"));
  exports.Set("fstatat_each", Napi::Function::New(env, FstatatEach, "fstatat_each"));
  exports.Set("statx", Napi::Function::New(env, Statx, "statx"));
  exports.Set("fstatfs", Napi::Function::New(env, Fstatfs, "fstatfs"));
}

}  // namespace treeseal
