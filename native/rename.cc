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
  int64_t olddirfd, newdirfd, flags;
  std::string oldpath, newpath;
  if (!ArgInt(info, 0, "olddirfd", &olddirfd) || !ArgPath(info, 1, "oldpath", &oldpath) ||
      !ArgInt(info, 2, "newdirfd", &newdirfd) || !ArgPath(info, 3, "newpath", &newpath) ||
      !ArgInt(info, 4, "flags", &flags))
    return info.Env().Undefined();
  int r = DoRenameat2(static_cast<int>(olddirfd), oldpath.c_str(), static_cast<int>(newdirfd), newpath.c_str(),
                      static_cast<unsigned>(flags));
  if (r < 0) return ThrowSys(info.Env(), -r, "renameat2", &oldpath, &newpath);
  return info.Env().Undefined();
}

void RegisterRename(Napi::Env env, Napi::Object exports) {
  exports.Set("renameat2", Napi::Function::New(env, Renameat2, "renameat2"));
}

}  // namespace treeseal
