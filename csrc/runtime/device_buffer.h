// The device memory behind one storage: the current PJRT buffer (a 1-d array) and
// how many bytes the storage holds. In-place writes swap `buffer`, so every tensor
// sharing the storage sees them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "hlo/types.h"
#include "pjrt/buffer.h"

namespace torch_tpu::runtime {

// A buffer laid out at bucket sizes (ops/bounded.h): the storage's values are the
// row-major tensor of shape `logical`, stored as the prefix box of a row-major array of
// shape `physical` (same rank, each dimension at least as large). Ops that know the
// layout read it at the bound with the real sizes as runtime operands; any other reader
// sees the logical values (an in-program slice, or a copy on the host).
struct Padding {
  std::vector<int64_t> logical, physical;
  // The dimensions whose size varies (padded, or exactly at their bucket).
  std::vector<int64_t> dynamic;
};

struct DeviceBuffer {
  DeviceBuffer(int device, size_t nbytes) : device(device), nbytes(nbytes) {}

  int device;
  size_t nbytes;
  // The storage's synthetic data pointer (see the allocator): the profiler's memory
  // events name allocations by it.
  uintptr_t address = 0;
  // Null until the first write: allocation is lazy.
  std::shared_ptr<pjrt::Buffer> buffer;
  // Element type and length of `buffer` (a storage may be written as bytes and read
  // back as floats, so the type travels with the buffer, not with the storage).
  hlo::DType dtype = hlo::DType::U8;
  int64_t numel = 0;
  // Fused eager mode: the id of the recorded value that holds the newest contents, which
  // no program has computed yet (`buffer` is null meanwhile); -1 when `buffer` is current.
  int64_t pending = -1;
  // Null for the usual flat layout.
  std::shared_ptr<const Padding> padding;

  // Whether the storage has been written (allocation is lazy).
  bool written() const { return buffer != nullptr || pending >= 0; }

  void assign(std::shared_ptr<pjrt::Buffer> b, hlo::DType type, int64_t n,
              std::shared_ptr<const Padding> layout = nullptr) {
    pending = -1;
    buffer = std::move(b);
    dtype = type;
    numel = n;
    padding = std::move(layout);
  }
};

}  // namespace torch_tpu::runtime
