// dir.cc: readdir of a dirfd (getdents64), mkdirat and unlinkat.
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <vector>

#include "args.h"
#include "call.h"
#include "ops.h"
#include "syserr.h"

namespace treeseal {

struct Dirent64 {
  uint64_t d_ino;
  int64_t d_off;
  unsigned short d_reclen;
  unsigned char d_type;
  char d_name[];
};

struct Listed {
  size_t offset;  // into names
  size_t length;
  unsigned char type;
};

// Lists every entry but "." and ".." from the start of the directory.
static int DoReaddir(int fd, std::string* names, std::vector<Listed>* out) {
  if (::lseek(fd, 0, SEEK_SET) < 0) return -errno;
  std::vector<char> buf(64 * 1024);
  for (;;) {
    long n;
    do n = ::syscall(SYS_getdents64, fd, buf.data(), buf.size());
    while (n < 0 && errno == EINTR);
    if (n < 0) return -errno;
    if (n == 0) return 0;
    for (long pos = 0; pos < n;) {
      const Dirent64* d = reinterpret_cast<const Dirent64*>(buf.data() + pos);
      size_t len = strlen(d->d_name);
      bool dot = (len == 1 && d->d_name[0] == '.') || (len == 2 && d->d_name[0] == '.' && d->d_name[1] == '.');
      if (!dot) {
        out->push_back({names->size(), len, d->d_type});
        names->append(d->d_name, len);
      }
      pos += d->d_reclen;
    }
  }
}

static int DoMkdirat(int dirfd, const char* path, int64_t mode) {
  return ::mkdirat(dirfd, path, static_cast<mode_t>(mode)) < 0 ? -errno : 0;
}

static int DoUnlinkat(int dirfd, const char* path, int64_t flags) {
  return ::unlinkat(dirfd, path, static_cast<int>(flags)) < 0 ? -errno : 0;
}

// readdir(fd) -> [{ name: string | Buffer, type: DT_* }]
static Napi::Value Readdir(const Napi::CallbackInfo& info) {
  int64_t fd;
  if (!ArgInt(info, 0, "fd", &fd)) return info.Env().Undefined();
  std::string names;
  std::vector<Listed> listed;
  int r = DoReaddir(static_cast<int>(fd), &names, &listed);
  if (r < 0) return ThrowSys(info.Env(), -r, "readdir");
  Napi::Env env = info.Env();
  Napi::Array out = Napi::Array::New(env, listed.size());
  Napi::String nameKey = Napi::String::New(env, "name");
  Napi::String typeKey = Napi::String::New(env, "type");
  for (size_t i = 0; i < listed.size(); i++) {
    Napi::Object o = Napi::Object::New(env);
    o.Set(nameKey, NameValue(env, names.data() + listed[i].offset, listed[i].length));
    o.Set(typeKey, Napi::Number::New(env, listed[i].type));
    out.Set(static_cast<uint32_t>(i), o);
  }
  return out;
}

void RegisterDir(Napi::Env env, Napi::Object exports) {
  exports.Set("readdir", Napi::Function::New(env, Readdir, "readdir"));
  // mkdirat(dirfd, path, mode)
  exports.Set("mkdirat", Napi::Function::New(env, [](const Napi::CallbackInfo& info) { return CallAtPathInt(info, "mkdirat", "mode", DoMkdirat); }, "mkdirat"));
  // unlinkat(dirfd, path, flags)
  exports.Set("unlinkat", Napi::Function::New(env, [](const Napi::CallbackInfo& info) { return CallAtPathInt(info, "unlinkat", "flags", DoUnlinkat); }, "unlinkat"));
}

}  // namespace treeseal
