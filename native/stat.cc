// stat.cc: fstat and fstatat, with nanosecond times as bigints; statx for inode attributes.
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>

#include "args.h"
#include "ops.h"
#include "syserr.h"

namespace treeseal {

static int DoFstat(int fd, struct stat* st) { return ::fstat(fd, st) < 0 ? -errno : 0; }

static int DoFstatat(int dirfd, const char* path, struct stat* st, int flags) {
  return ::fstatat(dirfd, path, st, flags) < 0 ? -errno : 0;
}

static Napi::Value StatObject(Napi::Env env, const struct stat& st) {
  Napi::Object o = Napi::Object::New(env);
  o.Set("dev", Napi::BigInt::New(env, static_cast<uint64_t>(st.st_dev)));
  o.Set("ino", Napi::BigInt::New(env, static_cast<uint64_t>(st.st_ino)));
  o.Set("mode", Napi::Number::New(env, st.st_mode));
  o.Set("nlink", Napi::Number::New(env, static_cast<double>(st.st_nlink)));
  o.Set("uid", Napi::Number::New(env, st.st_uid));
  o.Set("gid", Napi::Number::New(env, st.st_gid));
  o.Set("size", Napi::Number::New(env, static_cast<double>(st.st_size)));
  o.Set("blocks", Napi::Number::New(env, static_cast<double>(st.st_blocks)));
  o.Set("mtimeNs", Napi::BigInt::New(env, static_cast<int64_t>(static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000LL + st.st_mtim.tv_nsec)));
  o.Set("ctimeNs", Napi::BigInt::New(env, static_cast<int64_t>(static_cast<int64_t>(st.st_ctim.tv_sec) * 1000000000LL + st.st_ctim.tv_nsec)));
  return o;
}

// fstat(fd) -> Stat
static Napi::Value Fstat(const Napi::CallbackInfo& info) {
  int64_t fd;
  if (!ArgInt(info, 0, "fd", &fd)) return info.Env().Undefined();
  struct stat st;
  int r = DoFstat(static_cast<int>(fd), &st);
  if (r < 0) return ThrowSys(info.Env(), -r, "fstat");
  return StatObject(info.Env(), st);
}

// fstatat(dirfd, path, flags) -> Stat
static Napi::Value Fstatat(const Napi::CallbackInfo& info) {
  int64_t dirfd, flags;
  std::string path;
  if (!ArgInt(info, 0, "dirfd", &dirfd) || !ArgPath(info, 1, "path", &path) || !ArgInt(info, 2, "flags", &flags))
    return info.Env().Undefined();
  struct stat st;
  int r = DoFstatat(static_cast<int>(dirfd), path.c_str(), &st, static_cast<int>(flags));
  if (r < 0) return ThrowSys(info.Env(), -r, "fstatat", &path);
  return StatObject(info.Env(), st);
}

static int DoStatx(int dirfd, const char* path, int flags, struct statx* stx) {
  return ::statx(dirfd, path, flags, STATX_TYPE | STATX_MODE | STATX_UID, stx) < 0 ? -errno : 0;
}

// statx(dirfd, path, flags) -> { mode, uid, attributes, attributesMask }: the inode attributes
// (STATX_ATTR_IMMUTABLE, STATX_ATTR_APPEND, ...) that fstatat does not report.
static Napi::Value Statx(const Napi::CallbackInfo& info) {
  int64_t dirfd, flags;
  std::string path;
  if (!ArgInt(info, 0, "dirfd", &dirfd) || !ArgPath(info, 1, "path", &path) || !ArgInt(info, 2, "flags", &flags))
    return info.Env().Undefined();
  struct statx stx = {};
  int r = DoStatx(static_cast<int>(dirfd), path.c_str(), static_cast<int>(flags), &stx);
  if (r < 0) return ThrowSys(info.Env(), -r, "statx", &path);
  Napi::Object o = Napi::Object::New(info.Env());
  o.Set("mode", Napi::Number::New(info.Env(), stx.stx_mode));
  o.Set("uid", Napi::Number::New(info.Env(), stx.stx_uid));
  o.Set("attributes", Napi::Number::New(info.Env(), static_cast<double>(stx.stx_attributes)));
  o.Set("attributesMask", Napi::Number::New(info.Env(), static_cast<double>(stx.stx_attributes_mask)));
  return o;
}

void RegisterStat(Napi::Env env, Napi::Object exports) {
  exports.Set("fstat", Napi::Function::New(env, Fstat, "fstat"));
  exports.Set("fstatat", Napi::Function::New(env, Fstatat, "fstatat"));
  exports.Set("statx", Napi::Function::New(env, Statx, "statx"));
}

}  // namespace treeseal
