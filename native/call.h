// call.h: the JS faces shared by syscall wrappers whose arguments have the same shape.
#pragma once
#include <napi.h>
#include <stdint.h>
#include <sys/types.h>

#include "args.h"

namespace treeseal {

// (fd) -> undefined; op returns 0 or -errno.
Napi::Value CallFd(const Napi::CallbackInfo& info, const char* syscall, int (*op)(int));
// (fd, value) -> undefined, the value's argument named `arg` and read within `range`.
Napi::Value CallFdInt(const Napi::CallbackInfo& info, const char* syscall, const char* arg, IntRange range,
                      int (*op)(int, int64_t));
// (dirfd, path, value) -> undefined; errors name the path.
Napi::Value CallAtPathInt(const Napi::CallbackInfo& info, const char* syscall, const char* arg, IntRange range,
                          int (*op)(int, const char*, int64_t));
// (fd, buffer, offset, length, position) -> bytes moved; op returns a count or -errno.
Napi::Value CallIo(const Napi::CallbackInfo& info, const char* syscall, ssize_t (*op)(int, uint8_t*, size_t, int64_t));

}  // namespace treeseal
