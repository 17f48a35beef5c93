// syserr.h: builds Node-shaped system errors (errno < 0, code, syscall, path, dest).
#pragma once
#include <napi.h>
#include <string>

namespace treeseal {

// Throws a system error for a positive errno value and returns undefined.
// `path` and `dest` may be null; they are byte strings (shown lossily as UTF-8).
Napi::Value ThrowSys(Napi::Env env, int err, const char* syscall,
                     const std::string* path = nullptr, const std::string* dest = nullptr);

// Throws Node's argument error: a RangeError for ERR_OUT_OF_RANGE, else a TypeError
// (ERR_INVALID_ARG_TYPE/VALUE), with that code.
Napi::Value ThrowArg(Napi::Env env, const char* code, const std::string& message);

}  // namespace treeseal
