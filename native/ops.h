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
void RegisterConstants(Napi::Env env, Napi::Object exports);

// Runs a call that returns -1 and sets errno, again while it is interrupted (EINTR): 0 or -errno.
template <typename Call>
int Restart(Call call) {
  int r;
  do r = call();
  while (r < 0 && errno == EINTR);
  return r < 0 ? -errno : 0;
}

}  // namespace treeseal
