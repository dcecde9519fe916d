// Argument checks and messages shared by both tpu_dist transports: a bad call raises the
// same RuntimeError whichever transport serves the group.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include <string>
#include <vector>

namespace torch_tpu::distributed {

using Tensors = std::vector<at::Tensor>;

// `t` is a dense tpu tensor; with `device` >= 0, on tpu:`device` (the in-program
// transport's rank device).
void check_tpu(const at::Tensor& t, const char* op, int device = -1);

// At least one tensor, each one passing check_tpu, all of one dtype.
void check_tensors(const Tensors& ts, const char* op, int device = -1);

// A list form (all_gather's outputs, reduce_scatter's and scatter's inputs): `world`
// tensors, each of `single`'s dtype and element count.
void check_list(const Tensors& list, const at::Tensor& single, const char* op, int world,
                int device = -1);

// A tensor form (all_gather_into_tensor, reduce_scatter_tensor): each `whole[i]` holds
// `world` times the elements of `part[i]`, in the same dtype.
void check_whole(const Tensors& whole, const Tensors& part, const char* op, const char* whole_name,
                 const char* part_name, int world, int device = -1);

// "Float[2, 3], Long[4]": the tensors as a caller passed them, for messages.
std::string describe(const Tensors& ts);

// The message for ranks that made different calls, after "tpu_dist: <op>...: ".
extern const char* const kRanksDisagree;

// PREMUL_SUM's factor (raises if the op carries none).
const c10d::PreMulSumSupplement& premul_factor(const c10d::ReduceOp& op);

}  // namespace torch_tpu::distributed
