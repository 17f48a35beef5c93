// addon.cc: registers every syscall family; nothing else lives here.
#include <napi.h>

#include "ops.h"

static Napi::Object Init(Napi::Env env, Napi::Object exports) {
  treeseal::RegisterOpen(env, exports);
  treeseal::RegisterStat(env, exports);
  treeseal::RegisterDir(env, exports);
  treeseal::RegisterRename(env, exports);
  treeseal::RegisterLink(env, exports);
  treeseal::RegisterIo(env, exports);
  treeseal::RegisterMeta(env, exports);
  treeseal::RegisterClone(env, exports);
  treeseal::RegisterBtrfs(env, exports);
  treeseal::RegisterConstants(env, exports);
  return exports;
}

NODE_API_MODULE(treeseal, Init)
