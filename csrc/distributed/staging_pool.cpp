#include "distributed/staging_pool.h"

#include <ATen/ATen.h>

#include <cstdint>

#include "aten/allocator.h"
#include "aten/dtype.h"
#include "aten/op_call.h"
#include "distributed/work.h"
#include "runtime/fused_group.h"
#include "runtime/metrics.h"
#include "runtime/runtime.h"
#include "runtime/trace.h"

namespace torch_tpu::distributed {

using Tensors = std::vector<at::Tensor>;

at::Tensor StagingPool::take(int64_t numel, c10::ScalarType dtype) {
  const int64_t nbytes = numel * static_cast<int64_t>(c10::elementSize(dtype));
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = free_.find(nbytes);
    if (it != free_.end()) {
      c10::Storage storage = std::move(it->second);
      free_.erase(it);
      held_ -= nbytes;
      return at::empty({0}, at::TensorOptions().dtype(dtype)).set_(storage, 0, {numel}, {1});
    }
  }
  return at::empty({nbytes}, at::kByte).view(dtype);
}

// Runs where the last reader of a staged buffer lets go of it (a PJRT buffer's release
// callback, on whatever thread, maybe under a Python dispatch mode such as activation
// checkpointing's): it keeps the storage and runs no op.
void StagingPool::give(const at::Tensor& t) {
  c10::Storage storage = t.storage();
  const int64_t nbytes = static_cast<int64_t>(storage.nbytes());
  std::lock_guard<std::mutex> lock(mu_);
  if (nbytes == 0 || held_ + nbytes > kMaxBytes) return;
  held_ += nbytes;
  free_.emplace(nbytes, std::move(storage));
}

// aten's to_host, not Tensor::to: it reads the device buffer straight into the host
// tensor, where copy_ would stage it once more. With a pool, into one of its buffers.
at::Tensor to_host(const at::Tensor& t, StagingPool* pool) {
  runtime::metrics().host_staged_bytes += t.nbytes();
  runtime::trace::Scope traced("tpu_dist::stage_to_host");
  traced.text("transport", "host-staged");
  traced.number("bytes", static_cast<double>(t.nbytes()));
  if (pool == nullptr) return aten::to_host(t).contiguous();
  at::Tensor host = pool->take(t.numel(), t.scalar_type()).view(t.sizes());
  aten::to_host_into(t, host);
  return host;
}

// One device->host transfer for any number of tensors: join them on the device first.
at::Tensor to_host_flat(const Tensors& ts, StagingPool* pool) {
  if (ts.size() == 1) return to_host(ts[0].reshape(-1), pool);
  Tensors flat;
  flat.reserve(ts.size());
  for (const auto& t : ts) flat.push_back(t.reshape(-1));
  return to_host(at::cat(flat), pool);
}

namespace {

// Destinations of at least this size are written in place (see deliver_staged). Below
// it a fresh upload is cheaper (glibc reuses freed blocks of that size: 0.5 ms for
// 4 MiB, against 1 ms more for the in-place program).
constexpr int64_t kInPlaceBytes = int64_t{8} << 20;

// A pooled host buffer that goes back to its pool when the last user lets go of it.
struct Held {
  at::Tensor buffer;
  Pool pool;
  ~Held() { pool->give(buffer); }
};

}  // namespace

// Where device memory is host memory (XLA:CPU), a destination that covers its storage
// takes the piece of `src` itself as its device buffer (a view, no copy: the result
// stays in the pooled memory until the tensor's buffer dies, then the memory returns to
// the pool). Elsewhere, a large destination that covers its storage is not given a
// freshly uploaded buffer: a device program reads its piece of `src` in place and
// writes it into the destination's own buffer, donated (its pages are mapped already;
// on XLA:CPU faulting in a fresh 64 MiB buffer took 100 ms, against 8 ms for the copy).
// The program is an out= `where` whose output is also its input, which is what makes
// the old buffer an argument XLA may reuse. `src` returns to the pool once every buffer
// or program that reads it is done.
void deliver_staged(const at::Tensor& src, const Tensors& dsts, const Pool& pool) {
  SameVersions same(dsts);
  std::shared_ptr<Held> held(new Held{src, pool});
  runtime::Runtime& rt = runtime::Runtime::get();
  int64_t offset = 0;
  for (const auto& d : dsts) {
    at::Tensor piece = src.narrow(0, offset, d.numel());
    offset += d.numel();
    if (d.numel() == 0) continue;
    const hlo::DType dtype = aten::to_hlo(d.scalar_type());
    const c10::DeviceIndex device = d.device().index();
    const bool covers =
        d.is_contiguous() && d.storage_offset() == 0 && d.storage().nbytes() == d.nbytes();
    // XLA:CPU's buffers are 64-byte aligned; a piece that is not is copied.
    if (covers && reinterpret_cast<uintptr_t>(piece.data_ptr()) % 64 == 0) {
      std::shared_ptr<pjrt::Buffer> view =
          rt.view_host_memory(piece.data_ptr(), dtype, {d.numel()}, device, [held] {});
      if (view && aten::adopt_buffer(d, std::move(view))) continue;
    }
    if (d.nbytes() < kInPlaceBytes || !covers) {
      d.copy_(piece.view(d.sizes()));
      continue;
    }
    at::Tensor on_host = aten::wrap_buffer(
        rt.on_host_memory(piece.data_ptr(), dtype, {d.numel()}, device), dtype, d.sizes(), device);
    at::Tensor keep_new = at::zeros({}, d.options().dtype(at::kBool));
    at::where_out(const_cast<at::Tensor&>(d), keep_new, d, on_host);
    runtime::FusedGroup::get().ready(aten::device_buffer(d))->on_ready([held] {});
  }
}

}  // namespace torch_tpu::distributed
