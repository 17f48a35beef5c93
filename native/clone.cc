// clone.cc: ficlone (false when the pair cannot clone) and copy_file_range.
#include <errno.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "args.h"
#include "ops.h"
#include "syserr.h"

namespace treeseal {

// 1 cloned, 0 this filesystem or pair cannot clone, -errno otherwise.
static int DoFiclone(int destfd, int srcfd) {
  int r = RetryEintr([=] { return ::ioctl(destfd, FICLONE, srcfd); });
  if (r == 0) return 1;
  switch (-r) {
    case EXDEV:
    case EINVAL:
    case ENOTTY:
    case EOPNOTSUPP:
    case ENOSYS:
    case ETXTBSY:
      return 0;
    default:
      return r;
  }
}

// A partial count comes back as it is; EINTR means nothing was copied (see RetryEintr).
static ssize_t DoCopyFileRange(int fdin, int64_t offin, int fdout, int64_t offout, size_t len) {
  loff_t in = offin, out = offout;
  return RetryEintr([&] { return ::copy_file_range(fdin, offin < 0 ? nullptr : &in, fdout, offout < 0 ? nullptr : &out, len, 0); });
}

// ficlone(destfd, srcfd) -> boolean
static Napi::Value Ficlone(const Napi::CallbackInfo& info) {
  int destfd, srcfd;
  if (!ArgFd(info, 0, "destfd", &destfd) || !ArgFd(info, 1, "srcfd", &srcfd)) return info.Env().Undefined();
  int r = DoFiclone(destfd, srcfd);
  if (r < 0) return ThrowSys(info.Env(), -r, "ficlone");
  return Napi::Boolean::New(info.Env(), r == 1);
}

// copy_file_range(fdin, offin, fdout, offout, length) -> bytes copied (offset -1: the fd's own)
static Napi::Value CopyFileRange(const Napi::CallbackInfo& info) {
  int fdin, fdout;
  int64_t offin, offout, len;
  if (!ArgFd(info, 0, "fdIn", &fdin) || !ArgInt(info, 1, "offIn", kPositionRange, &offin) || !ArgFd(info, 2, "fdOut", &fdout) ||
      !ArgInt(info, 3, "offOut", kPositionRange, &offout) || !ArgInt(info, 4, "length", kCountRange, &len))
    return info.Env().Undefined();
  ssize_t n = DoCopyFileRange(fdin, offin, fdout, offout, static_cast<size_t>(len));
  if (n < 0) return ThrowSys(info.Env(), static_cast<int>(-n), "copy_file_range");
  return Napi::Number::New(info.Env(), static_cast<double>(n));
}

void RegisterClone(Napi::Env env, Napi::Object exports) {
  exports.Set("ficlone", Napi::Function::New(env, Ficlone, "ficlone"));
  exports.Set("copy_file_range", Napi::Function::New(env, CopyFileRange, "copy_file_range"));
}

}  // namespace treeseal
