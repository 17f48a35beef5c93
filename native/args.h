// args.h: argument readers shared by the syscall wrappers; each returns false after throwing.
#pragma once
#include <napi.h>
#include <stdint.h>
#include <string>

namespace treeseal {

bool ArgInt(const Napi::CallbackInfo& info, size_t i, const char* name, int64_t* out);
// A path is a string (UTF-8) or a Buffer (raw bytes); NUL bytes are refused.
bool ArgPath(const Napi::CallbackInfo& info, size_t i, const char* name, std::string* out);
bool ArgBuffer(const Napi::CallbackInfo& info, size_t i, const char* name, uint8_t** data, size_t* len);

// A name from the kernel: a string when it is valid UTF-8, else a Buffer of its bytes.
Napi::Value NameValue(Napi::Env env, const char* data, size_t len);
bool ValidUtf8(const char* data, size_t len);

}  // namespace treeseal
