// The generic op executor: turns one ATen call into a cached StableHLO program.
//
//   OpCall call("mm");
//   call.input(a).input(b);
//   at::Tensor out = call.run(emit)[0];  // emit: a runtime::Emit, the op's body
//
// Tensor inputs enter as their storage's flat buffer plus a runtime offset, read
// through a strided prologue; Python scalars enter as cached 0-d buffers. (Literal
// scalars XLA simplifies with, and in fused mode the offsets of views of values computed
// in the same group, are constants instead: scalar() and view_operand().) The program
// key holds only what changes the program (shapes, strides, dtypes, op parameters),
// so a loop over `x[i] + k` compiles once. The lowering runs only on a cache miss.
//
// In fused eager mode (runtime/fused_group.h) the call is recorded instead of run, and
// the body runs later, when the group is built: an Emit must capture by value. The lowering
// table's kernel (aten/lowered_kernel) is the one caller for ops with a lowering; the
// others are the hand-written kernels ops/registry.h allows.
#pragma once

#include <ATen/core/Tensor.h>

#include <functional>
#include <memory>
#include <optional>
#include <unordered_map>
#include <vector>

#include "aten/call_memo.h"
#include "hlo/builder.h"
#include "ops/bounded.h"
#include "ops/strided.h"
#include "runtime/device_buffer.h"
#include "runtime/executable_cache.h"
#include "runtime/fused_group.h"

namespace torch_tpu::aten {

class OpCall {
 public:
  explicit OpCall(const char* name);

  // Lets the inputs added after it that are stored padded at bucket sizes (an earlier
  // bucketed result) be read at their bound, with their real sizes as runtime operands,
  // for ops that stay exact that way (ops/bounded.h), and a whole target stored padded be
  // written at its bound (its value must broadcast to the bound: fill). Off when
  // TORCH_TPU_SHAPE_BUCKETS is.
  OpCall& buckets();
  // A tpu tensor, or a 0-d CPU tensor (which becomes a runtime scalar).
  OpCall& input(const at::Tensor& tensor);
  // A scalar operand of `dtype`: a runtime operand, so a new value never recompiles.
  // A `literal` (a number in the user's code: a Python scalar argument, a wrapped number)
  // whose value is one XLA simplifies with (constant_scalar in op_call.cpp) is a constant
  // instead, and part of the key: pow(x, 2) runs as x * x, an alpha of 1 costs nothing.
  OpCall& scalar(const c10::Scalar& value, c10::ScalarType dtype, bool literal = false);
  // Whether a literal `value` may be such a constant (for some dtype).
  static bool constant_candidate(const c10::Scalar& value);
  // A static parameter of the lowering: part of the program key.
  OpCall& key(int64_t word);
  OpCall& key(c10::IntArrayRef words);

  // Runs and returns the lowering's results as new contiguous tensors.
  std::vector<at::Tensor> run(const runtime::Emit& lower);
  // Runs and writes result i into targets[i] (converted to its dtype and broadcast to
  // its shape), in place: every alias of a target sees the new values.
  void write(const runtime::Emit& lower, const std::vector<at::Tensor>& targets);
  // Both in one program: the first `fresh` results become new tensors, the rest are
  // written into `targets`.
  std::vector<at::Tensor> run_and_write(const runtime::Emit& lower, size_t fresh,
                                        const std::vector<at::Tensor>& targets);
  // Whether an input is read at its bound: the program serves every size in its buckets.
  bool bucketed() const { return !dynamic_sizes_.empty(); }
  // The shape `tensor` (an input) has in the program: its bound when read at the bound.
  std::vector<int64_t> bound_sizes(const at::Tensor& tensor) const;
  // The same with each dimension that varies one larger: result sizes computed from these
  // and from bound_sizes differ exactly in the result's dynamic dimensions.
  std::vector<int64_t> probe_sizes(const at::Tensor& tensor) const;
  // The fresh results' real sizes, and their sizes in the program: the results come back
  // padded at bucket sizes along the dimensions that differ, or that `varying` marks
  // (per result and dimension: dynamic in the program, or changing from call to call),
  // and are stored so.
  void pad_outputs(const std::vector<std::vector<int64_t>>& real,
                   const std::vector<std::vector<int64_t>>& bound,
                   const std::vector<std::vector<bool>>& varying = {});
  // Whether result dimensions differ between `bound` and `probe` shapes (same layout).
  static std::vector<std::vector<bool>> differ(const std::vector<std::vector<int64_t>>& bound,
                                               const std::vector<std::vector<int64_t>>& probe);
  // The key so far: inputs, scalars and parameters added before the call.
  const runtime::ProgramKey& program_key() const { return key_; }
  // The key with the real sizes of inputs read at their bound (which the program key
  // leaves out): what output shapes depend on.
  runtime::ProgramKey sized_key() const;
  // How many lowering inputs have been added (tensors and scalars).
  size_t num_inputs() const { return inputs_.size(); }
  // Asks run() to say how a later call with the same inputs could run its program
  // directly (aten/call_memo.h): plan() then holds that, or nothing where this call is not
  // of that form (fused mode, padded inputs, views with offsets built into the program,
  // targets that are not inputs).
  OpCall& want_plan() {
    want_plan_ = true;
    return *this;
  }
  const std::optional<CallPlan>& plan() const { return plan_; }
  // Fused mode's form of the same: `call` (its kernel, signature and result metadata
  // filled in) goes, with the plan, to the op this call records, where the call has the
  // memo's form (a trace's op then serves the next step's equal call directly).
  OpCall& replay_as(std::shared_ptr<ReplayCall> call) {
    replay_ = std::move(call);
    return *this;
  }

 private:
  struct Base {
    runtime::DeviceBuffer* buffer;
    int param;
    std::shared_ptr<const runtime::Padding> padding;  // how the buffer is laid out
    bool unpad = false;  // an operand reads it as plain values (an in-program slice)
  };
  struct Operand {
    enum class Kind { View, Scalar, Padded } kind;
    int param = -1;       // scalar param (-1: the scalar is `constant`), or the view's offset
    double constant = 0;  // a literal scalar built into the program
    int64_t static_offset = -1;  // a View's offset built into the program (no `param`)
    int imag_param = -1;  // a complex scalar's imaginary part
    int base = -1;        // index into bases_
    hlo::DType dtype;
    std::vector<int64_t> sizes, strides;
    ops::StridedLayout layout;
    bool physical = false;  // a View located in its padded storage (ops::physical_view)
    std::shared_ptr<const ops::PaddedRead> padded;           // Padded: read at the bound
    std::shared_ptr<const runtime::Padding> target_padding;  // a whole target kept padded
    std::vector<int> size_params;                            // ... with these real sizes
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
    std::shared_ptr<const runtime::Padding> padding;  // a whole target written padded
  };
  struct WritePlan {
    std::vector<Assignment> assignments;
    std::vector<int> base_writer;  // per base: the target that rewrites it, or -1
    // (parameter, assignment): an old buffer the program overwrites and nothing else
    // holds, donated to the output that replaces it.
    std::vector<std::pair<int, int>> donations;
  };

  Operand view_operand(const at::Tensor& tensor, bool needs_base);
  // The index of `db`'s entry in bases_, added (with its parameter) if new.
  int base_of(runtime::DeviceBuffer& db);
  // The fresh results as tensors (padded where pad_outputs said), backed by `buffers`
  // (null in fused mode: bound to group values by the caller).
  std::vector<at::Tensor> wrap_fresh(
      const std::vector<hlo::TensorType>& types, size_t n,
      const std::vector<std::shared_ptr<pjrt::Buffer>>& buffers) const;
  int add_param(hlo::DType dtype, std::vector<int64_t> shape, std::shared_ptr<pjrt::Buffer> buffer,
                uint64_t bits = 0, int64_t pending = -1);
  void use_device(const at::Tensor& tensor);
  WritePlan plan_writes(const std::vector<Operand>& outs,
                        const std::vector<at::Tensor>& targets) const;
  // The program on a cache miss: reads of the inputs, the lowering, the writes.
  runtime::Program build(const runtime::Emit& lower, size_t fresh, const std::vector<Operand>& outs,
                         const WritePlan& plan) const;
  // The same body written into `b` over `params` (one per lowering parameter): the
  // program's outputs, and their types (fresh results in their own shapes) in `types`.
  std::vector<hlo::Value> emit(hlo::Builder& b, const std::vector<hlo::Value>& params,
                               const runtime::Emit& lower, size_t fresh,
                               const std::vector<Operand>& outs,
                               const std::vector<int>& base_writer,
                               std::vector<hlo::TensorType>* types) const;
  std::vector<at::Tensor> execute(const runtime::Emit& lower, size_t fresh,
                                  const std::vector<at::Tensor>& targets);
  // Fused mode: records the call into the pending group; results are bound to its values.
  std::vector<at::Tensor> record(const runtime::Emit& lower, size_t fresh,
                                 const std::vector<at::Tensor>& targets, std::vector<Operand> outs,
                                 const WritePlan& plan);

  const char* name_;
  int device_ = -1;
  hlo::Precision precision_;  // of f32 matrix products (aten/precision.h)
  runtime::ProgramKey key_;
  std::vector<hlo::TensorType> params_;
  std::vector<Arg> args_;
  std::vector<Base> bases_;
  std::vector<Operand> inputs_;
  bool allow_buckets_ = false;
  std::vector<int64_t> dynamic_sizes_;  // real sizes of the inputs read at their bound
  std::unordered_map<const c10::TensorImpl*, std::shared_ptr<const ops::PaddedRead>> bound_of_;
  // Per fresh result: its real sizes, and per dimension the length it is made static at
  // (-1: left as the lowering gives it).
  std::vector<std::vector<int64_t>> out_real_, out_lengths_;
  std::vector<std::vector<int64_t>> out_dynamic_;  // ... and the dimensions stored padded
  bool want_plan_ = false;
  std::optional<CallPlan> plan_;
  std::shared_ptr<ReplayCall> replay_;
  // Where each input goes among the parameters and which inputs `writes` replace, where
  // this call has the memo's form (a program aside); nullopt otherwise.
  std::optional<CallPlan> input_plan(const WritePlan& writes) const;
  // plan_ for `program` and `writes`, where this call (op mode) has the memo's form.
  void make_plan(std::shared_ptr<const runtime::CompiledProgram> program, const WritePlan& writes);
};

// A contiguous tpu tensor with `tensor`'s values in a plain (unpadded) flat buffer, for
// code that hands the buffer to PJRT itself.
at::Tensor plain_contiguous(const at::Tensor& tensor);

// The contents of a tpu tensor as a new contiguous CPU tensor (waits for the device).
at::Tensor to_host(const at::Tensor& tensor);
// The same into `host`, a contiguous CPU tensor of `tensor`'s dtype and element count
// (a reused staging buffer, whose pages are already mapped).
void to_host_into(const at::Tensor& tensor, const at::Tensor& host);
// The same copy, started (`tensor.to("cpu", non_blocking=True)`): returns at once, and
// torch.tpu.synchronize() or an event recorded after it waits for it. False, with
// nothing copied, where `tensor` is stored padded.
bool to_host_async_into(const at::Tensor& tensor, const at::Tensor& host);
// A new contiguous tpu tensor on `device` holding `host`'s values.
at::Tensor from_host(const at::Tensor& host, c10::DeviceIndex device);
// A new contiguous tpu tensor backed by `buffer`.
at::Tensor wrap_buffer(std::shared_ptr<pjrt::Buffer> buffer, hlo::DType dtype,
                       c10::IntArrayRef sizes, c10::DeviceIndex device);

// Where device memory is host memory (XLA:CPU): the address of `tensor`'s elements when
// they are its whole device buffer, dense, once it is computed (waits for it); null
// otherwise. Valid while the tensor keeps its buffer.
const void* host_address(const at::Tensor& tensor);

// Makes `buffer` (dense, 1-d or dst's shape, dst's dtype and element count) the contents
// of `dst` when dst covers its whole storage: no program runs. Returns false, leaving dst
// unchanged, when it does not (a view of part of a storage, or empty).
bool adopt_buffer(const at::Tensor& dst, std::shared_ptr<pjrt::Buffer> buffer);

}  // namespace torch_tpu::aten
