// btrfs.cc: the btrfs subvolume ioctls: BTRFS_IOC_SUBVOL_CREATE, BTRFS_IOC_SNAP_CREATE_V2,
// BTRFS_IOC_SUBVOL_GETFLAGS, BTRFS_IOC_SUBVOL_SETFLAGS and BTRFS_IOC_SNAP_DESTROY_V2.
// Each is one ioctl on a directory fd; a name is one component below it (the kernel refuses a '/').
// No policy: what a refusal (ENOTTY off btrfs, EPERM, EXDEV, EDQUOT) means is the caller's.
#include <errno.h>
#include <linux/btrfs.h>
#include <string.h>
#include <sys/ioctl.h>

#include <string>

#include "args.h"
#include "ops.h"
#include "syserr.h"

namespace treeseal {

// Copies name into a vol_args name field of `size` bytes (NUL included); ENAMETOOLONG when it does not fit.
static int PutName(char* field, size_t size, const std::string& name) {
  if (name.size() >= size) return -ENAMETOOLONG;
  memset(field, 0, size);
  memcpy(field, name.data(), name.size());
  return 0;
}

// A new, empty subvolume `name` in the directory open at dirfd (its root directory's mode: 0777 less the umask).
static int DoSubvolCreate(int dirfd, const std::string& name) {
  struct btrfs_ioctl_vol_args args;
  memset(&args, 0, sizeof args);
  int r = PutName(args.name, sizeof args.name, name);
  if (r < 0) return r;
  return RetryEintr([&] { return ::ioctl(dirfd, BTRFS_IOC_SUBVOL_CREATE, &args); });
}

// A snapshot `name`, in the directory open at dirfd, of the subvolume whose root directory is open at srcfd.
static int DoSnapCreate(int dirfd, const std::string& name, int srcfd, uint64_t flags) {
  struct btrfs_ioctl_vol_args_v2 args;
  memset(&args, 0, sizeof args);
  int r = PutName(args.name, sizeof args.name, name);
  if (r < 0) return r;
  args.fd = srcfd;
  args.flags = flags;
  return RetryEintr([&] { return ::ioctl(dirfd, BTRFS_IOC_SNAP_CREATE_V2, &args); });
}

// The flags (BTRFS_SUBVOL_RDONLY) of the subvolume whose root directory is open at fd; EINVAL for any other directory.
static int DoSubvolGetflags(int fd, uint64_t* flags) {
  return RetryEintr([&] { return ::ioctl(fd, BTRFS_IOC_SUBVOL_GETFLAGS, flags); });
}

static int DoSubvolSetflags(int fd, uint64_t flags) {
  return RetryEintr([&] { return ::ioctl(fd, BTRFS_IOC_SUBVOL_SETFLAGS, &flags); });
}

// Deletes the subvolume `name` in the directory open at dirfd, whatever it holds (CAP_SYS_ADMIN, or user_subvol_rm_allowed).
static int DoSnapDestroy(int dirfd, const std::string& name) {
  struct btrfs_ioctl_vol_args_v2 args;
  memset(&args, 0, sizeof args);
  int r = PutName(args.name, sizeof args.name, name);
  if (r < 0) return r;
  return RetryEintr([&] { return ::ioctl(dirfd, BTRFS_IOC_SNAP_DESTROY_V2, &args); });
}

// btrfs_subvol_create(dirfd, name)
static Napi::Value SubvolCreate(const Napi::CallbackInfo& info) {
  int dirfd;
  std::string name;
  if (!ArgFd(info, 0, "dirfd", &dirfd) || !ArgPath(info, 1, "name", &name)) return info.Env().Undefined();
  int r = DoSubvolCreate(dirfd, name);
  if (r < 0) return ThrowSys(info.Env(), -r, "btrfs_subvol_create", &name);
  return info.Env().Undefined();
}

// btrfs_snap_create(dirfd, name, srcfd, flags): flags 0 (writable) or BTRFS_SUBVOL_RDONLY
static Napi::Value SnapCreate(const Napi::CallbackInfo& info) {
  int dirfd, srcfd;
  int64_t flags;
  std::string name;
  if (!ArgFd(info, 0, "dirfd", &dirfd) || !ArgPath(info, 1, "name", &name) || !ArgFd(info, 2, "srcfd", &srcfd) ||
      !ArgInt(info, 3, "flags", kCountRange, &flags))
    return info.Env().Undefined();
  int r = DoSnapCreate(dirfd, name, srcfd, static_cast<uint64_t>(flags));
  if (r < 0) return ThrowSys(info.Env(), -r, "btrfs_snap_create", &name);
  return info.Env().Undefined();
}

// btrfs_subvol_getflags(fd) -> flags
static Napi::Value SubvolGetflags(const Napi::CallbackInfo& info) {
  int fd;
  if (!ArgFd(info, 0, "fd", &fd)) return info.Env().Undefined();
  uint64_t flags = 0;
  int r = DoSubvolGetflags(fd, &flags);
  if (r < 0) return ThrowSys(info.Env(), -r, "btrfs_subvol_getflags");
  return Napi::Number::New(info.Env(), static_cast<double>(flags));
}

// btrfs_subvol_setflags(fd, flags)
static Napi::Value SubvolSetflags(const Napi::CallbackInfo& info) {
  int fd;
  int64_t flags;
  if (!ArgFd(info, 0, "fd", &fd) || !ArgInt(info, 1, "flags", kCountRange, &flags)) return info.Env().Undefined();
  int r = DoSubvolSetflags(fd, static_cast<uint64_t>(flags));
  if (r < 0) return ThrowSys(info.Env(), -r, "btrfs_subvol_setflags");
  return info.Env().Undefined();
}

// btrfs_snap_destroy(dirfd, name)
static Napi::Value SnapDestroy(const Napi::CallbackInfo& info) {
  int dirfd;
  std::string name;
  if (!ArgFd(info, 0, "dirfd", &dirfd) || !ArgPath(info, 1, "name", &name)) return info.Env().Undefined();
  int r = DoSnapDestroy(dirfd, name);
  if (r < 0) return ThrowSys(info.Env(), -r, "btrfs_snap_destroy", &name);
  return info.Env().Undefined();
}

void RegisterBtrfs(Napi::Env env, Napi::Object exports) {
  exports.Set("btrfs_subvol_create", Napi::Function::New(env, SubvolCreate, "btrfs_subvol_create"));
  exports.Set("btrfs_snap_create", Napi::Function::New(env, SnapCreate, "btrfs_snap_create"));
  exports.Set("btrfs_subvol_getflags", Napi::Function::New(env, SubvolGetflags, "btrfs_subvol_getflags"));
  exports.Set("btrfs_subvol_setflags", Napi::Function::New(env, SubvolSetflags, "btrfs_subvol_setflags"));
  exports.Set("btrfs_snap_destroy", Napi::Function::New(env, SnapDestroy, "btrfs_snap_destroy"));
}

}  // namespace treeseal
