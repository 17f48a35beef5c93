{
  "targets": [
    {
      "target_name": "treeseal",
      "sources": [
        "native/addon.cc",
        "native/args.cc",
        "native/call.cc",
        "native/syserr.cc",
        "native/open.cc",
        "native/stat.cc",
        "native/dir.cc",
        "native/rename.cc",
        "native/link.cc",
        "native/io.cc",
        "native/meta.cc",
        "native/clone.cc",
        "native/btrfs.cc",
        "native/constants.cc"
      ],
      "include_dirs": ["<!(node -p \"require('node-addon-api').include_dir\")"],
      "defines": [
        "NAPI_VERSION=8",
        "NODE_ADDON_API_DISABLE_CPP_EXCEPTIONS",
        "_GNU_SOURCE",
        "TREESEAL_ADDON_REVISION=<!(node -p \"require('./native/revision.json').revision\")"
      ],
      "cflags_cc": ["-std=c++17", "-O2", "-Wall", "-Wextra", "-fno-exceptions"],
      "conditions": [["OS!='linux'", { "type": "none" }]]
    }
  ]
}
