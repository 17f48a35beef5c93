// constants.cc: the kernel's flag values, read from the headers of the platform being built for.
#include <dirent.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <linux/openat2.h>
#include <sys/file.h>
#include <sys/stat.h>

#include "ops.h"

#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1 << 0)
#endif
#ifndef RENAME_EXCHANGE
#define RENAME_EXCHANGE (1 << 1)
#endif

namespace treeseal {

void RegisterConstants(Napi::Env env, Napi::Object exports) {
  Napi::Object c = Napi::Object::New(env);
  const struct {
    const char* name;
    long long value;
  } table[] = {
      {"O_RDONLY", O_RDONLY},     {"O_WRONLY", O_WRONLY},       {"O_RDWR", O_RDWR},
      {"O_CREAT", O_CREAT},       {"O_EXCL", O_EXCL},           {"O_TRUNC", O_TRUNC},
      {"O_APPEND", O_APPEND},     {"O_NOFOLLOW", O_NOFOLLOW},   {"O_DIRECTORY", O_DIRECTORY},
      {"O_PATH", O_PATH},         {"O_NONBLOCK", O_NONBLOCK},   {"O_CLOEXEC", O_CLOEXEC},
      {"O_NOCTTY", O_NOCTTY},     {"AT_FDCWD", AT_FDCWD},       {"AT_SYMLINK_NOFOLLOW", AT_SYMLINK_NOFOLLOW},
      {"AT_REMOVEDIR", AT_REMOVEDIR}, {"AT_EMPTY_PATH", AT_EMPTY_PATH},
      {"RESOLVE_NO_XDEV", RESOLVE_NO_XDEV}, {"RESOLVE_NO_MAGICLINKS", RESOLVE_NO_MAGICLINKS},
      {"RESOLVE_NO_SYMLINKS", RESOLVE_NO_SYMLINKS}, {"RESOLVE_BENEATH", RESOLVE_BENEATH},
      {"RESOLVE_IN_ROOT", RESOLVE_IN_ROOT},
      {"RENAME_NOREPLACE", RENAME_NOREPLACE}, {"RENAME_EXCHANGE", RENAME_EXCHANGE},
      {"LOCK_SH", LOCK_SH},       {"LOCK_EX", LOCK_EX},         {"LOCK_NB", LOCK_NB},
      {"LOCK_UN", LOCK_UN},       {"S_IFMT", S_IFMT},           {"S_IFREG", S_IFREG},
      {"S_IFDIR", S_IFDIR},       {"S_IFLNK", S_IFLNK},         {"S_IFIFO", S_IFIFO},
      {"S_IFSOCK", S_IFSOCK},     {"S_IFCHR", S_IFCHR},         {"S_IFBLK", S_IFBLK},
      {"DT_UNKNOWN", DT_UNKNOWN}, {"DT_FIFO", DT_FIFO},         {"DT_CHR", DT_CHR},
      {"DT_DIR", DT_DIR},         {"DT_BLK", DT_BLK},           {"DT_REG", DT_REG},
      {"DT_LNK", DT_LNK},         {"DT_SOCK", DT_SOCK},
  };
  for (const auto& entry : table) c.Set(entry.name, Napi::Number::New(env, static_cast<double>(entry.value)));
  c.Freeze();
  exports.Set("constants", c);
}

}  // namespace treeseal
