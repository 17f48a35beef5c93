// dir.cc: readdir of a dirfd (getdents64), mkdirat and unlinkat.
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
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

// The kernel's record (struct linux_dirent64 in getdents64(2)); only its offsets are used.
struct Dirent64 {
  uint64_t d_ino;
  int64_t d_off;
  unsigned short d_reclen;
  unsigned char d_type;
  char d_name[1];
};

struct Listed {
  size_t offset;  // into names
  size_t length;
  unsigned char type;
};

// Lists every entry but "." and ".." from the start of the directory.
static int DoReaddir(int fd, std::string* names, std::vector<Listed>* out) {
  off_t start = RetryEintr([=] { return ::lseek(fd, 0, SEEK_SET); });
  if (start < 0) return static_cast<int>(start);
  std::vector<char> buf(64 * 1024);
  for (;;) {
    long n = RetryEintr([&] { return ::syscall(SYS_getdents64, fd, buf.data(), buf.size()); });
    if (n < 0) return static_cast<int>(n);
    if (n == 0) return 0;
    for (long pos = 0; pos < n;) {
      // The record's fields are read by their offsets with memcpy: no struct is laid over the buffer.
      const char* record = buf.data() + pos;
      unsigned short reclen;
      unsigned char type;
      memcpy(&reclen, record + offsetof(Dirent64, d_reclen), sizeof reclen);
      memcpy(&type, record + offsetof(Dirent64, d_type), sizeof type);
      const char* name = record + offsetof(Dirent64, d_name);
      size_t len = strlen(name);
      bool dot = (len == 1 && name[0] == '.') || (len == 2 && name[0] == '.' && name[1] == '.');
      if (!dot) {
        out->push_back({names->size(), len, type});
        names->append(name, len);
      }
      pos += reclen;
    }
  }
}

// mode is read as a uint32 (mode_t), flags as an int32 (kUint32Range, kInt32Range below).
static int DoMkdirat(int dirfd, const char* path, int64_t mode) {
  return RetryEintr([=] { return ::mkdirat(dirfd, path, static_cast<mode_t>(mode)); });
}

static int DoUnlinkat(int dirfd, const char* path, int64_t flags) {
  return RetryEintr([=] { return ::unlinkat(dirfd, path, static_cast<int>(flags)); });
}

// readdir(fd) -> [names, types, odd]: every entry but "." and ".." in getdents order, in three
// values rather than an object per entry. names: the UTF-8 names joined by "/" (a byte no name
// holds); types: a Buffer of their DT_* bytes, one per entry; odd: [index, Buffer] for each name
// that is not valid UTF-8 (its place in names is left empty).
static Napi::Value Readdir(const Napi::CallbackInfo& info) {
  int fd;
  if (!ArgFd(info, 0, "fd", &fd)) return info.Env().Undefined();
  std::string names;
  std::vector<Listed> listed;
  int r = DoReaddir(fd, &names, &listed);
  if (r < 0) return ThrowSys(info.Env(), -r, "readdir");
  Napi::Env env = info.Env();
  std::string joined;
  joined.reserve(names.size() + listed.size());
  Napi::Buffer<uint8_t> types = Napi::Buffer<uint8_t>::New(env, listed.size());
  Napi::Array odd = Napi::Array::New(env);
  for (size_t i = 0; i < listed.size(); i++) {
    const char* name = names.data() + listed[i].offset;
    if (i > 0) joined.push_back('/');
    if (ValidUtf8(name, listed[i].length)) {
      joined.append(name, listed[i].length);
    } else {
      Napi::Array pair = Napi::Array::New(env, 2);
      pair.Set(static_cast<uint32_t>(0), Napi::Number::New(env, static_cast<double>(i)));
      pair.Set(static_cast<uint32_t>(1), Napi::Buffer<char>::Copy(env, name, listed[i].length));
      odd.Set(odd.Length(), pair);
    }
    types.Data()[i] = listed[i].type;
  }
  Napi::Array out = Napi::Array::New(env, 3);
  out.Set(static_cast<uint32_t>(0), Napi::String::New(env, joined.data(), joined.size()));
  out.Set(static_cast<uint32_t>(1), types);
  out.Set(static_cast<uint32_t>(2), odd);
  return out;
}

void RegisterDir(Napi::Env env, Napi::Object exports) {
  exports.Set("readdir", Napi::Function::New(env, Readdir, "readdir"));
  // mkdirat(dirfd, path, mode)
  exports.Set("mkdirat", Napi::Function::New(env, [](const Napi::CallbackInfo& info) { return CallAtPathInt(info, "mkdirat", "mode", kUint32Range, DoMkdirat); }, "mkdirat"));
  // unlinkat(dirfd, path, flags)
  exports.Set("unlinkat", Napi::Function::New(env, [](const Napi::CallbackInfo& info) { return CallAtPathInt(info, "unlinkat", "flags", kInt32Range, DoUnlinkat); }, "unlinkat"));
}

}  // namespace treeseal
