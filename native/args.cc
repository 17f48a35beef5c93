// args.cc: argument readers (range-checked before any conversion) and the UTF-8 check used for names that come back from the kernel.
#include "args.h"

#include <fcntl.h>

#include <cmath>
#include <cstring>

#include "syserr.h"

namespace treeseal {

namespace {

enum class Kind {
  kFd,      // a number in [0, 2^31 - 1], shown as node:fs's own fd check shows it
  kDirFd,   // the same, or AT_FDCWD
  kInteger  // a number or a bigint in range, shown as Node's validateInteger shows it
};

// A JavaScript value as String() shows it (numbers: "1.5", "NaN", "1e+21"; bigints: digits).
std::string Text(Napi::Value v) {
  Napi::String s = v.ToString();
  return s.IsEmpty() ? std::string() : s.Utf8Value();
}

// 4294967299 -> 4_294_967_299, the way Node shows a large integer it received.
std::string Separated(const std::string& digits) {
  size_t start = !digits.empty() && digits[0] == '-' ? 1 : 0;
  std::string out;
  size_t i = digits.size();
  for (; i >= start + 4; i -= 3) out = "_" + digits.substr(i - 3, 3) + out;
  return digits.substr(0, i) + out;
}

// What Node's ERR_INVALID_ARG_TYPE says it received (its determineSpecificType):
// `type number (1.5)`, `type string ('x')`, `an instance of Array`, `function f`, `null`.
std::string Described(Napi::Env env, Napi::Value v) {
  switch (v.Type()) {
    case napi_undefined:
      return "undefined";
    case napi_null:
      return "null";
    case napi_boolean:
      return v.As<Napi::Boolean>().Value() ? "type boolean (true)" : "type boolean (false)";
    case napi_number: {
      double d = v.As<Napi::Number>().DoubleValue();
      return std::string("type number (") + (d == 0 && std::signbit(d) ? "-0" : Text(v)) + ")";
    }
    case napi_bigint:
      return "type bigint (" + Text(v) + "n)";
    case napi_string: {
      std::u16string s = v.As<Napi::String>().Utf16Value();
      Napi::String shown = v.As<Napi::String>();
      if (s.size() > 28) shown = Napi::String::New(env, s.substr(0, 25) + u"...");
      std::string text = shown.Utf8Value();
      if (text.find('\'') == std::string::npos) return "type string ('" + text + "')";
      Napi::Object json = env.Global().Get("JSON").As<Napi::Object>();
      return "type string (" + Text(json.Get("stringify").As<Napi::Function>().Call(json, {shown})) + ")";
    }
    case napi_symbol:
      return "type symbol (" + Text(env.Global().Get("String").As<Napi::Function>().Call({v})) + ")";
    case napi_function:
      return "function " + Text(v.As<Napi::Object>().Get("name"));
    default: {
      Napi::Value ctor = v.As<Napi::Object>().Get("constructor");
      if (!env.IsExceptionPending() && ctor.IsObject() && ctor.As<Napi::Object>().Has("name")) {
        return "an instance of " + Text(ctor.As<Napi::Object>().Get("name"));
      }
      if (env.IsExceptionPending()) env.GetAndClearPendingException();
      return "[Object: null prototype]";
    }
  }
}

bool InvalidType(Napi::Env env, const char* name, const char* expected, Napi::Value v) {
  ThrowArg(env, "ERR_INVALID_ARG_TYPE",
           std::string("The \"") + name + "\" argument must be " + expected + ". Received " + Described(env, v));
  return false;
}

std::string RangeText(IntRange range) {
  return ">= " + std::to_string(range.min) + " && <= " + std::to_string(range.max);
}

bool ReadInteger(const Napi::CallbackInfo& info, size_t i, const char* name, IntRange range, Kind kind,
                 int64_t* out) {
  Napi::Env env = info.Env();
  Napi::Value v = info[i];
  std::string must = RangeText(range);
  if (kind == Kind::kDirFd) must += " or AT_FDCWD (" + std::to_string(AT_FDCWD) + ")";
  if (v.IsNumber()) {
    double d = v.As<Napi::Number>().DoubleValue();
    // Checked as a double first: converting NaN, an infinity or a value outside int64_t is
    // undefined behaviour, and a cast to a narrower type would truncate.
    if (!std::isfinite(d) || std::trunc(d) != d) return OutOfRange(env, name, "an integer", Text(v));
    if (kind == Kind::kDirFd && d == AT_FDCWD) {
      *out = AT_FDCWD;
      return true;
    }
    if (d < static_cast<double>(range.min) || d > static_cast<double>(range.max)) {
      // node:fs shows a refused fd as String() does; validateInteger separates large integers.
      bool separate = kind == Kind::kInteger && std::fabs(d) > 4294967296.0;
      return OutOfRange(env, name, must, separate ? Separated(Text(v)) : Text(v));
    }
    *out = static_cast<int64_t>(d);  // exact: an integer inside bounds that are exact doubles
    return true;
  }
  if (kind == Kind::kInteger && v.IsBigInt()) {
    bool lossless = false;
    int64_t n = v.As<Napi::BigInt>().Int64Value(&lossless);
    if (lossless && n >= range.min && n <= range.max) {
      *out = n;
      return true;
    }
    std::string digits = Text(v);
    bool large = !lossless || n > 4294967296LL || n < -4294967296LL;
    return OutOfRange(env, name, must, (large ? Separated(digits) : digits) + "n");
  }
  return InvalidType(env, name, kind == Kind::kInteger ? "one of type number or bigint" : "of type number", v);
}

}  // namespace

bool OutOfRange(Napi::Env env, const char* name, const std::string& must, const std::string& received) {
  ThrowArg(env, "ERR_OUT_OF_RANGE",
           std::string("The value of \"") + name + "\" is out of range. It must be " + must + ". Received " + received);
  return false;
}

std::string IntegerText(int64_t v) {
  std::string digits = std::to_string(v);
  return v > 4294967296LL || v < -4294967296LL ? Separated(digits) : digits;
}

bool ArgFd(const Napi::CallbackInfo& info, size_t i, const char* name, int* out) {
  int64_t v;
  if (!ReadInteger(info, i, name, {0, INT32_MAX}, Kind::kFd, &v)) return false;
  *out = static_cast<int>(v);
  return true;
}

bool ArgDirFd(const Napi::CallbackInfo& info, size_t i, const char* name, int* out) {
  int64_t v;
  if (!ReadInteger(info, i, name, {0, INT32_MAX}, Kind::kDirFd, &v)) return false;
  *out = static_cast<int>(v);
  return true;
}

bool ArgInt(const Napi::CallbackInfo& info, size_t i, const char* name, IntRange range, int64_t* out) {
  return ReadInteger(info, i, name, range, Kind::kInteger, out);
}

bool ArgInt32(const Napi::CallbackInfo& info, size_t i, const char* name, int* out) {
  int64_t v;
  if (!ReadInteger(info, i, name, kInt32Range, Kind::kInteger, &v)) return false;
  *out = static_cast<int>(v);
  return true;
}

bool ArgUint32(const Napi::CallbackInfo& info, size_t i, const char* name, uint32_t* out) {
  int64_t v;
  if (!ReadInteger(info, i, name, kUint32Range, Kind::kInteger, &v)) return false;
  *out = static_cast<uint32_t>(v);
  return true;
}

bool ArgPath(const Napi::CallbackInfo& info, size_t i, const char* name, std::string* out) {
  Napi::Value v = info[i];
  if (v.IsString()) {
    *out = v.As<Napi::String>().Utf8Value();
  } else if (v.IsBuffer()) {
    Napi::Buffer<char> b = v.As<Napi::Buffer<char>>();
    out->assign(b.Data(), b.Length());
  } else {
    return InvalidType(info.Env(), name, "of type string or an instance of Buffer", v);
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
    return InvalidType(info.Env(), name, "an instance of Buffer or Uint8Array", v);
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
