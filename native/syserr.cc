// syserr.cc: the one place where failed syscalls become Node-shaped system errors.
#include "syserr.h"

#include <uv.h>

namespace treeseal {

Napi::Value ThrowSys(Napi::Env env, int err, const char* syscall, const std::string* path,
                     const std::string* dest) {
  const char* code = uv_err_name(-err);
  // libuv's wording, as node:fs words the same error.
  std::string message = std::string(code) + ": " + uv_strerror(-err) + ", " + syscall;
  if (path) message += " '" + *path + "'";
  if (dest) message += " -> '" + *dest + "'";
  Napi::Error error = Napi::Error::New(env, message);
  Napi::Object obj = error.Value();
  obj.Set("errno", Napi::Number::New(env, -err));
  obj.Set("code", Napi::String::New(env, code));
  obj.Set("syscall", Napi::String::New(env, syscall));
  if (path) obj.Set("path", Napi::String::New(env, *path));
  if (dest) obj.Set("dest", Napi::String::New(env, *dest));
  error.ThrowAsJavaScriptException();
  return env.Undefined();
}

Napi::Value ThrowArg(Napi::Env env, const char* code, const std::string& message) {
  // Node throws ERR_OUT_OF_RANGE as a RangeError, the other argument errors as TypeErrors.
  Napi::Error error = std::string(code) == "ERR_OUT_OF_RANGE" ? Napi::Error(Napi::RangeError::New(env, message))
                                                              : Napi::Error(Napi::TypeError::New(env, message));
  error.Value().Set("code", Napi::String::New(env, code));
  error.ThrowAsJavaScriptException();
  return env.Undefined();
}

}  // namespace treeseal
