// ops.h: the registration hook of each syscall family and the shared helpers they use.
#pragma once
#include <errno.h>
#include <napi.h>

namespace treeseal {

void RegisterOpen(Napi::Env env, Napi::Object exports);
void RegisterStat(Napi::Env env, Napi::Object exports);
void RegisterDir(Napi::Env env, Napi::Object exports);
void RegisterRename(Napi::Env env, Napi::Object exports);
void RegisterLink(Napi::Env env, Napi::Object exports);
void RegisterIo(Napi::Env env, Napi::Object exports);
void RegisterMeta(Napi::Env env, Napi::Object exports);
void RegisterClone(Napi::Env env, Napi::Object exports);
void RegisterBtrfs(Napi::Env env, Napi::Object exports);
void RegisterConstants(Napi::Env env, Napi::Object exports);

// The addon's one EINTR policy. Every syscall wrapper makes its call through RetryEintr,
// which repeats the call while it fails with EINTR (a signal arrived before the call did
// anything) and returns its result, or -errno when it failed otherwise. It is the only
// EINTR handling in native/. Two cases are deliberate:
//
// - close(2) is never repeated. On Linux the descriptor is released even when close reports
//   EINTR, so a second close could close a descriptor another thread has just been given;
//   DoClose (open.cc) counts EINTR as done.
// - read, write, pread, pwrite and copy_file_range report EINTR only when nothing was moved
//   yet: an interrupted transfer that moved some bytes returns that partial count instead.
//   So repeating on EINTR never moves a byte twice, and a partial count is returned as it
//   is (never continued here): looping until done is the JavaScript caller's policy.
//
// `call` returns -1 and sets errno on failure (a libc wrapper or syscall(2)); its result type
// (int, long, ssize_t, off_t) is kept.
template <typename Call>
auto RetryEintr(Call call) -> decltype(call()) {
  decltype(call()) r;
  do r = call();
  while (r < 0 && errno == EINTR);
  return r < 0 ? -errno : r;
}

}  // namespace treeseal
