// syserr.cc: the one place where failed syscalls become Node-shaped system errors.
#include "syserr.h"

#include <string.h>
#include <uv.h>

namespace treeseal {

// The code and text of a positive errno: libuv's (as node:fs words the same error); for an
// errno libuv has no name for (EDQUOT, ENOLCK, ESTALE, EUCLEAN, ...) the C library's name and
// text, so err.code still names it; Node's UNKNOWN only when neither knows it.
static void Describe(int err, std::string* code, std::string* text) {
  char buf[256];
  uv_err_name_r(-err, buf, sizeof buf);
  if (strncmp(buf, "Unknown system error", 20) != 0) {
    *code = buf;
    uv_strerror_r(-err, buf, sizeof buf);
    *text = buf;
    return;
  }
  const char* name = nullptr;
  const char* description = nullptr;
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 32))
  name = strerrordesc_np(err) ? strerrorname_np(err) : nullptr;
  description = strerrordesc_np(err);
#endif
  if (name == nullptr || description == nullptr) {
    *code = "UNKNOWN";
    *text = "unknown error";
    return;
  }
  *code = name;
  // libuv's texts start in lower case ("no such file or directory"); so does this one.
  *text = description;
  if (!text->empty() && (*text)[0] >= 'A' && (*text)[0] <= 'Z' && !(text->size() > 1 && (*text)[1] >= 'A' && (*text)[1] <= 'Z'))
    (*text)[0] = static_cast<char>((*text)[0] - 'A' + 'a');
}

Napi::Value ThrowSys(Napi::Env env, int err, const char* syscall, const std::string* path,
                     const std::string* dest) {
  std::string code, text;
  Describe(err, &code, &text);
  std::string message = code + ": " + text + ", " + syscall;
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
