// args.h: argument readers shared by the syscall wrappers; each returns false after throwing.
//
// Every reader checks the JavaScript value before converting it: a number must be finite,
// integral and inside the range of the C type it becomes, and only then is it converted, so
// no value (NaN, ±Infinity, 2^63, 2^32 + 3) is ever cast out of range or truncated. A bad
// value is refused with Node's own argument errors: a TypeError with code
// ERR_INVALID_ARG_TYPE for a wrong type, a RangeError with code ERR_OUT_OF_RANGE for a
// number outside the range, worded as node:fs words them.
#pragma once
#include <napi.h>
#include <stdint.h>
#include <string>

namespace treeseal {

// The inclusive bounds of an integer argument. Every bound lies within ±(2^53 - 1), so each
// is an exact double and a number inside them converts to int64_t exactly.
struct IntRange {
  int64_t min;
  int64_t max;
};
inline constexpr int64_t kMaxSafeInteger = (int64_t{1} << 53) - 1;  // Number.MAX_SAFE_INTEGER
inline constexpr IntRange kInt32Range{INT32_MIN, INT32_MAX};         // a C int: flags, whence, operation
inline constexpr IntRange kUint32Range{0, UINT32_MAX};               // mode_t, unsigned flags
inline constexpr IntRange kOffsetRange{-kMaxSafeInteger, kMaxSafeInteger};  // an off_t the kernel judges
inline constexpr IntRange kPositionRange{-1, kMaxSafeInteger};       // a file position; -1: the fd's own
inline constexpr IntRange kCountRange{0, kMaxSafeInteger};           // a byte count, 64-bit flags
inline constexpr IntRange kSecondsRange{-kMaxSafeInteger, kMaxSafeInteger};  // a timespec's tv_sec (time_t)
// A timespec's tv_nsec: 0 to 999999999, or UTIME_OMIT (2^30 - 2) or UTIME_NOW (2^30 - 1); the kernel judges the values between.
inline constexpr IntRange kNanosecondsRange{0, (int64_t{1} << 30) - 1};
constexpr bool ExactBounds(IntRange r) { return -kMaxSafeInteger <= r.min && r.min <= r.max && r.max <= kMaxSafeInteger; }
static_assert(ExactBounds(kInt32Range) && ExactBounds(kUint32Range) && ExactBounds(kOffsetRange) &&
                  ExactBounds(kPositionRange) && ExactBounds(kCountRange) && ExactBounds(kSecondsRange) &&
                  ExactBounds(kNanosecondsRange),
              "integer argument bounds must be exact doubles");

// A file descriptor: a number that is an integer in [0, 2^31 - 1], checked as node:fs checks
// one (`The value of "fd" is out of range. It must be >= 0 && <= 2147483647. Received ...`).
bool ArgFd(const Napi::CallbackInfo& info, size_t i, const char* name, int* out);
// The directory fd of an *at call: a file descriptor, or AT_FDCWD.
bool ArgDirFd(const Napi::CallbackInfo& info, size_t i, const char* name, int* out);
// Any other integer: a number (or a bigint) inside `range`, whose bounds are ExactBounds.
bool ArgInt(const Napi::CallbackInfo& info, size_t i, const char* name, IntRange range, int64_t* out);
bool ArgInt32(const Napi::CallbackInfo& info, size_t i, const char* name, int* out);
bool ArgUint32(const Napi::CallbackInfo& info, size_t i, const char* name, uint32_t* out);
// A path is a string (UTF-8) or a Buffer (raw bytes); NUL bytes are refused.
bool ArgPath(const Napi::CallbackInfo& info, size_t i, const char* name, std::string* out);
bool ArgBuffer(const Napi::CallbackInfo& info, size_t i, const char* name, uint8_t** data, size_t* len);

// Throws ERR_OUT_OF_RANGE for `name`, `must` saying what it must be (">= 0", "an integer");
// `received` is the value as Node shows it. Returns false.
bool OutOfRange(Napi::Env env, const char* name, const std::string& must, const std::string& received);

// An integer as Node's ERR_OUT_OF_RANGE shows it: digits, in groups of three beyond ±2^32 (4_294_967_299).
std::string IntegerText(int64_t v);

// A name from the kernel: a string when it is valid UTF-8, else a Buffer of its bytes.
Napi::Value NameValue(Napi::Env env, const char* data, size_t len);
bool ValidUtf8(const char* data, size_t len);

}  // namespace treeseal
