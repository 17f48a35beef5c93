// syserr.cc: the one place where failed syscalls become Node-shaped system errors.
#include "syserr.h"

#include <string.h>
#include <uv.h>

namespace treeseal {

static std::string Describe(int err) {
  char buf[256];
  const char* text = strerror_r(err, buf, sizeof buf);
  std::string out = text ? text : "unknown error";
  if (!out.empty() && out[0] >= 'A' && out[0] <= 'Z' && !(out.size() > 1 && out[1] >= 'A' && out[1] <= 'Z')) {
    out[0] = static_cast<char>(out[0] - 'A' + 'a');
  }
  return out;
}

Napi::Value ThrowSys(Napi::Env env, int err, const char* syscall, const std::string* path,
                     const std::string* dest) {
  const char* code = uv_err_name(-err);
  std::string message = std::string(code) + ": " + Describe(err) + ", " + syscall;
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
  Napi::TypeError error = Napi::TypeError::New(env, message);
  error.Value().Set("code", Napi::String::New(env, code));
  error.ThrowAsJavaScriptException();
  return env.Undefined();
}

}  // namespace treeseal
