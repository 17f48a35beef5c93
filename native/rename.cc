// rename.cc: renameat2 with RENAME_NOREPLACE / RENAME_EXCHANGE.
#include <errno.h>
#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "args.h"
#include "ops.h"
#include "syserr.h"

namespace treeseal {

static int DoRenameat2(int olddirfd, const char* oldpath, int newdirfd, const char* newpath, unsigned flags) {
  return static_cast<int>(RetryEintr([=] { return ::syscall(SYS_renameat2, olddirfd, oldpath, newdirfd, newpath, flags); }));
}

// renameat2(olddirfd, oldpath, newdirfd, newpath, flags)
static Napi::Value Renameat2(const Napi::CallbackInfo& info) {
  int olddirfd, newdirfd;
  uint32_t flags;
  std::string oldpath, newpath;
  if (!ArgDirFd(info, 0, "olddirfd", &olddirfd) || !ArgPath(info, 1, "oldpath", &oldpath) ||
      !ArgDirFd(info, 2, "newdirfd", &newdirfd) || !ArgPath(info, 3, "newpath", &newpath) ||
      !ArgUint32(info, 4, "flags", &flags))
    return info.Env().Undefined();
  int r = DoRenameat2(olddirfd, oldpath.c_str(), newdirfd, newpath.c_str(), flags);
  if (r < 0) return ThrowSys(info.Env(), -r, "renameat2", &oldpath, &newpath);
  return info.Env().Undefined();
}

void RegisterRename(Napi::Env env, Napi::Object exports) {
  exports.Set("renameat2", Napi::Function::New(env, Renameat2, "renameat2"));
}

}  // namespace treeseal
