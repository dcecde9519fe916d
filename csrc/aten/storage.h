// Growing and shrinking tpu storages in place (resize_, set_, UntypedStorage.resize_).
#pragma once

#include <c10/core/Storage.h>

namespace torch_tpu::aten {

// Gives `storage` `nbytes` bytes, keeping the common prefix of its contents.
void resize_storage_bytes(const c10::Storage& storage, size_t nbytes);

}  // namespace torch_tpu::aten
