// The generic op executor: turns one ATen call into a cached StableHLO program.
//
//   OpCall call("add");
//   call.input(a).input(b).scalar(alpha, dtype).key(static_cast<int64_t>(dtype));
//   at::Tensor out = call.run(lowering)[0];
//
// Tensor inputs enter as their storage's flat buffer plus a runtime offset, read
// through a strided prologue; Python scalars enter as cached 0-d buffers. The program
// key holds only what changes the program (shapes, strides, dtypes, op parameters),
// so a loop over `x[i] + k` compiles once. The lowering runs only on a cache miss.
//
// In fused eager mode (runtime/fused_group.h) the call is recorded instead of run, and
// the lowering runs later, when the group is built: a Lowering must capture by value.
#pragma once

#include <ATen/core/Tensor.h>

#include <functional>
#include <memory>
#include <vector>

#include "hlo/builder.h"
#include "ops/strided.h"
#include "runtime/device_buffer.h"
#include "runtime/executable_cache.h"

namespace torch_tpu::aten {

using Lowering =
    std::function<std::vector<hlo::Value>(hlo::Builder&, const std::vector<hlo::Value>&)>;

class OpCall {
 public:
  explicit OpCall(const char* name);

  // A tpu tensor, or a 0-d CPU tensor (which becomes a runtime scalar).
  OpCall& input(const at::Tensor& tensor);
  // A runtime scalar operand of `dtype`.
  OpCall& scalar(const c10::Scalar& value, c10::ScalarType dtype);
  // A static parameter of the lowering: part of the program key.
  OpCall& key(int64_t word);
  OpCall& key(c10::IntArrayRef words);

  // Runs and returns the lowering's results as new contiguous tensors.
  std::vector<at::Tensor> run(const Lowering& lower);
  // Runs and writes result i into targets[i] (converted to its dtype and broadcast to
  // its shape), in place: every alias of a target sees the new values.
  void write(const Lowering& lower, const std::vector<at::Tensor>& targets);
  // Both in one program: the first `fresh` results become new tensors, the rest are
  // written into `targets`.
  std::vector<at::Tensor> run_and_write(const Lowering& lower, size_t fresh,
                                        const std::vector<at::Tensor>& targets);
  // The key so far: inputs, scalars and parameters added before the call.
  const runtime::ProgramKey& program_key() const { return key_; }
  // How many lowering inputs have been added (tensors and scalars).
  size_t num_inputs() const { return inputs_.size(); }

 private:
  struct Base {
    runtime::DeviceBuffer* buffer;
    int param;
  };
  struct Operand {
    enum class Kind { View, Scalar } kind;
    int param = -1;          // scalar param, or the view's offset param
    int imag_param = -1;     // a complex scalar's imaginary part
    int base = -1;           // index into bases_
    hlo::DType dtype;
    std::vector<int64_t> sizes, strides;
    ops::StridedLayout layout;
  };
  struct Arg {
    std::shared_ptr<pjrt::Buffer> buffer;  // null for scalars until the device is known
    hlo::DType dtype;
    uint64_t bits;
    int64_t pending = -1;  // fused mode: the group value it reads instead of `buffer`
  };

  // Where each program output that is not a fresh result goes, in program order: dense
  // targets first, then the rewritten base buffers.
  struct Assignment {
    runtime::DeviceBuffer* buffer;
    hlo::DType dtype;
    int64_t numel;
  };
  struct WritePlan {
    std::vector<Assignment> assignments;
    std::vector<int> base_writer;  // per base: the target that rewrites it, or -1
    // (parameter, assignment): an old buffer the program overwrites and nothing else
    // holds, donated to the output that replaces it.
    std::vector<std::pair<int, int>> donations;
  };

  Operand view_operand(const at::Tensor& tensor, bool needs_base);
  int add_param(hlo::DType dtype, std::vector<int64_t> shape, std::shared_ptr<pjrt::Buffer> buffer,
                uint64_t bits = 0, int64_t pending = -1);
  void use_device(const at::Tensor& tensor);
  WritePlan plan_writes(const std::vector<Operand>& outs,
                        const std::vector<at::Tensor>& targets) const;
  // The program on a cache miss: reads of the inputs, the lowering, the writes.
  runtime::Program build(const Lowering& lower, size_t fresh, const std::vector<Operand>& outs,
                         const WritePlan& plan) const;
  // The same body written into `b` over `params` (one per lowering parameter): the
  // program's outputs, and their types (fresh results in their own shapes) in `types`.
  std::vector<hlo::Value> emit(hlo::Builder& b, const std::vector<hlo::Value>& params,
                               const Lowering& lower, size_t fresh,
                               const std::vector<Operand>& outs, const std::vector<int>& base_writer,
                               std::vector<hlo::TensorType>* types) const;
  std::vector<at::Tensor> execute(const Lowering& lower, size_t fresh,
                                  const std::vector<at::Tensor>& targets);
  // Fused mode: records the call into the pending group; results are bound to its values.
  std::vector<at::Tensor> record(const Lowering& lower, size_t fresh,
                                 const std::vector<at::Tensor>& targets,
                                 std::vector<Operand> outs, const WritePlan& plan);

  const char* name_;
  int device_ = -1;
  hlo::Precision precision_;  // of f32 matrix products (aten/precision.h)
  runtime::ProgramKey key_;
  std::vector<hlo::TensorType> params_;
  std::vector<Arg> args_;
  std::vector<Base> bases_;
  std::vector<Operand> inputs_;
};

// The contents of a tpu tensor as a new contiguous CPU tensor (waits for the device).
at::Tensor to_host(const at::Tensor& tensor);
// The same into `host`, a contiguous CPU tensor of `tensor`'s dtype and element count
// (a reused staging buffer, whose pages are already mapped).
void to_host_into(const at::Tensor& tensor, const at::Tensor& host);
// A new contiguous tpu tensor on `device` holding `host`'s values.
at::Tensor from_host(const at::Tensor& host, c10::DeviceIndex device);
// A new contiguous tpu tensor backed by `buffer`.
at::Tensor wrap_buffer(std::shared_ptr<pjrt::Buffer> buffer, hlo::DType dtype,
                       c10::IntArrayRef sizes, c10::DeviceIndex device);

}  // namespace torch_tpu::aten
