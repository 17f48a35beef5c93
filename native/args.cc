// args.cc: argument readers and the UTF-8 check used for names that come back from the kernel.
#include "args.h"

#include <cstring>

#include "syserr.h"

namespace treeseal {

bool ArgInt(const Napi::CallbackInfo& info, size_t i, const char* name, int64_t* out) {
  Napi::Value v = info[i];
  if (v.IsNumber()) {
    double d = v.As<Napi::Number>().DoubleValue();
    if (d != static_cast<double>(static_cast<int64_t>(d))) {
      ThrowArg(info.Env(), "ERR_OUT_OF_RANGE", std::string("The \"") + name + "\" argument must be an integer");
      return false;
    }
    *out = static_cast<int64_t>(d);
    return true;
  }
  if (v.IsBigInt()) {
    bool lossless = false;
    *out = v.As<Napi::BigInt>().Int64Value(&lossless);
    if (lossless) return true;
  }
  ThrowArg(info.Env(), "ERR_INVALID_ARG_TYPE", std::string("The \"") + name + "\" argument must be of type number");
  return false;
}

bool ArgPath(const Napi::CallbackInfo& info, size_t i, const char* name, std::string* out) {
  Napi::Value v = info[i];
  if (v.IsString()) {
    *out = v.As<Napi::String>().Utf8Value();
  } else if (v.IsBuffer()) {
    Napi::Buffer<char> b = v.As<Napi::Buffer<char>>();
    out->assign(b.Data(), b.Length());
  } else {
    ThrowArg(info.Env(), "ERR_INVALID_ARG_TYPE",
             std::string("The \"") + name + "\" argument must be of type string or an instance of Buffer");
    return false;
  }
  if (out->find('\0') != std::string::npos) {
    ThrowArg(info.Env(), "ERR_INVALID_ARG_VALUE",
             std::string("The argument '") + name + "' must be a string or Uint8Array without null bytes");
    return false;
  }
  return true;
}

bool ArgBuffer(const Napi::CallbackInfo& info, size_t i, const char* name, uint8_t** data, size_t* len) {
  Napi::Value v = info[i];
  if (!v.IsTypedArray() || v.As<Napi::TypedArray>().TypedArrayType() != napi_uint8_array) {
    ThrowArg(info.Env(), "ERR_INVALID_ARG_TYPE",
             std::string("The \"") + name + "\" argument must be an instance of Buffer or Uint8Array");
    return false;
  }
  Napi::Uint8Array a = v.As<Napi::Uint8Array>();
  *data = a.Data();
  *len = a.ByteLength();
  return true;
}

bool ValidUtf8(const char* data, size_t len) {
  const unsigned char* s = reinterpret_cast<const unsigned char*>(data);
  size_t i = 0;
  while (i < len) {
    unsigned char c = s[i];
    if (c < 0x80) {
      i++;
      continue;
    }
    size_t n;
    uint32_t cp;
    if ((c & 0xE0) == 0xC0) {
      n = 1;
      cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      n = 2;
      cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      n = 3;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (len - i <= n) return false;
    for (size_t k = 1; k <= n; k++) {
      if ((s[i + k] & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (s[i + k] & 0x3F);
    }
    if ((n == 1 && cp < 0x80) || (n == 2 && cp < 0x800) || (n == 3 && cp < 0x10000)) return false;
    if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += n + 1;
  }
  return true;
}

Napi::Value NameValue(Napi::Env env, const char* data, size_t len) {
  if (ValidUtf8(data, len)) return Napi::String::New(env, data, len);
  return Napi::Buffer<char>::Copy(env, data, len);
}

}  // namespace treeseal
