#include "corun/catalog/nvml.h"

#include <dlfcn.h>

namespace corun::nvml {

Result<std::unique_ptr<Library>> Library::open(const std::string& library, unsigned index) {
  std::unique_ptr<Library> lib(new Library());
  lib->path_ = library;
  lib->handle_ = ::dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib->handle_ == nullptr) {
    const char* why = ::dlerror();
    return Error("NVML unavailable: cannot load " + library + (why ? std::string(": ") + why : ""),
                 Error::Kind::kResource);
  }
  const auto init = lib->symbol<Return (*)()>("nvmlInit_v2");
  lib->shutdown_ = lib->symbol<Return (*)()>("nvmlShutdown");
  const auto by_index =
      lib->symbol<Return (*)(unsigned, Device*)>("nvmlDeviceGetHandleByIndex_v2");
  const char* missing = init == nullptr                 ? "nvmlInit_v2"
                        : lib->shutdown_ == nullptr      ? "nvmlShutdown"
                        : by_index == nullptr            ? "nvmlDeviceGetHandleByIndex_v2"
                                                         : nullptr;
  if (missing != nullptr) {
    return Error("NVML unavailable: " + library + " has no symbol " + missing,
                 Error::Kind::kResource);
  }
  if (const Return r = init(); r != 0) {
    return Error("NVML unavailable: nvmlInit_v2 returned " + std::to_string(r),
                 Error::Kind::kResource);
  }
  lib->initialised_ = true;
  if (const Return r = by_index(index, &lib->device_); r != 0) {
    return Error("NVML: no GPU " + std::to_string(index) + " (status " + std::to_string(r) + ")",
                 Error::Kind::kResource);
  }
  return lib;
}

Library::~Library() {
  if (initialised_ && shutdown_ != nullptr) shutdown_();
  if (handle_ != nullptr) ::dlclose(handle_);
}

void* Library::raw_symbol(const char* name) const { return ::dlsym(handle_, name); }

}  // namespace corun::nvml
