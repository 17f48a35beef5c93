// constants.cc: the kernel's flag values, read from the headers of the platform being built for.
#include <dirent.h>
#include <fcntl.h>
#include <linux/btrfs.h>
#include <linux/close_range.h>
#include <linux/magic.h>
#include <linux/fs.h>
#include <linux/openat2.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ops.h"

#ifndef TREESEAL_ADDON_REVISION
#error "TREESEAL_ADDON_REVISION is defined by binding.gyp from native/revision.json"
#endif

#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1 << 0)
#endif
#ifndef RENAME_EXCHANGE
#define RENAME_EXCHANGE (1 << 1)
#endif

namespace treeseal {

void RegisterConstants(Napi::Env env, Napi::Object exports) {
  Napi::Object c = Napi::Object::New(env);
#define TREESEAL_ENTRY(name) {#name, name},
  const struct {
    const char* name;
    long long value;
  } table[] = {
      // open(2) flags
      TREESEAL_ENTRY(O_RDONLY) TREESEAL_ENTRY(O_WRONLY) TREESEAL_ENTRY(O_RDWR) TREESEAL_ENTRY(O_CREAT) TREESEAL_ENTRY(O_EXCL)
      TREESEAL_ENTRY(O_TRUNC) TREESEAL_ENTRY(O_APPEND) TREESEAL_ENTRY(O_NOFOLLOW) TREESEAL_ENTRY(O_DIRECTORY) TREESEAL_ENTRY(O_PATH)
      TREESEAL_ENTRY(O_NONBLOCK) TREESEAL_ENTRY(O_CLOEXEC) TREESEAL_ENTRY(O_NOCTTY) TREESEAL_ENTRY(O_TMPFILE)
      // *at(2) flags
      TREESEAL_ENTRY(AT_FDCWD) TREESEAL_ENTRY(AT_SYMLINK_NOFOLLOW) TREESEAL_ENTRY(AT_REMOVEDIR) TREESEAL_ENTRY(AT_EMPTY_PATH)
      TREESEAL_ENTRY(AT_SYMLINK_FOLLOW)
      // utimensat(2) and futimens(2) nanosecond values
      TREESEAL_ENTRY(UTIME_NOW) TREESEAL_ENTRY(UTIME_OMIT)
      // openat2(2) resolve flags
      TREESEAL_ENTRY(RESOLVE_NO_XDEV) TREESEAL_ENTRY(RESOLVE_NO_MAGICLINKS) TREESEAL_ENTRY(RESOLVE_NO_SYMLINKS)
      TREESEAL_ENTRY(RESOLVE_BENEATH) TREESEAL_ENTRY(RESOLVE_IN_ROOT)
      // lseek(2) whence values
      TREESEAL_ENTRY(SEEK_SET) TREESEAL_ENTRY(SEEK_CUR) TREESEAL_ENTRY(SEEK_END) TREESEAL_ENTRY(SEEK_DATA) TREESEAL_ENTRY(SEEK_HOLE)
      // sync_file_range(2) flags
      TREESEAL_ENTRY(SYNC_FILE_RANGE_WAIT_BEFORE) TREESEAL_ENTRY(SYNC_FILE_RANGE_WRITE) TREESEAL_ENTRY(SYNC_FILE_RANGE_WAIT_AFTER)
      // statfs(2) f_type values
      TREESEAL_ENTRY(TMPFS_MAGIC) TREESEAL_ENTRY(RAMFS_MAGIC) TREESEAL_ENTRY(OVERLAYFS_SUPER_MAGIC) TREESEAL_ENTRY(BTRFS_SUPER_MAGIC)
      TREESEAL_ENTRY(PROC_SUPER_MAGIC) TREESEAL_ENTRY(SYSFS_MAGIC)
      // renameat2(2) and flock(2)
      TREESEAL_ENTRY(RENAME_NOREPLACE) TREESEAL_ENTRY(RENAME_EXCHANGE)
      TREESEAL_ENTRY(LOCK_SH) TREESEAL_ENTRY(LOCK_EX) TREESEAL_ENTRY(LOCK_NB) TREESEAL_ENTRY(LOCK_UN)
      // st_mode types and getdents64 d_type values
      TREESEAL_ENTRY(S_IFMT) TREESEAL_ENTRY(S_IFREG) TREESEAL_ENTRY(S_IFDIR) TREESEAL_ENTRY(S_IFLNK) TREESEAL_ENTRY(S_IFIFO)
      TREESEAL_ENTRY(S_IFSOCK) TREESEAL_ENTRY(S_IFCHR) TREESEAL_ENTRY(S_IFBLK)
      TREESEAL_ENTRY(DT_UNKNOWN) TREESEAL_ENTRY(DT_FIFO) TREESEAL_ENTRY(DT_CHR) TREESEAL_ENTRY(DT_DIR) TREESEAL_ENTRY(DT_BLK)
      TREESEAL_ENTRY(DT_REG) TREESEAL_ENTRY(DT_LNK) TREESEAL_ENTRY(DT_SOCK)
      // statx(2) attributes
      TREESEAL_ENTRY(STATX_ATTR_IMMUTABLE) TREESEAL_ENTRY(STATX_ATTR_APPEND) TREESEAL_ENTRY(STATX_ATTR_MOUNT_ROOT)
      // btrfs subvolume flags (BTRFS_IOC_SUBVOL_GETFLAGS, SETFLAGS, SNAP_CREATE_V2)
      TREESEAL_ENTRY(BTRFS_SUBVOL_RDONLY)
      // close_range(2) flags
      TREESEAL_ENTRY(CLOSE_RANGE_CLOEXEC)
  };
#undef TREESEAL_ENTRY
  for (const auto& entry : table) c.Set(entry.name, Napi::Number::New(env, static_cast<double>(entry.value)));
  c.Freeze();
  exports.Set("constants", c);
  // The interface revision, from native/revision.json (binding.gyp defines it), which the
  // JavaScript also builds in (ADDON_REVISION in src/sys/native.ts): a stale build is refused.
  exports.Set("revision", Napi::Number::New(env, TREESEAL_ADDON_REVISION));
}

}  // namespace treeseal
