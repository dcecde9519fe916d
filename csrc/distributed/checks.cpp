#include "distributed/checks.h"

#include <c10/util/Exception.h>

namespace torch_tpu::distributed {

const char* const kRanksDisagree =
    "the ranks of the group disagree on the collective, its shapes, dtypes or root; every "
    "rank must make the same call";

void check_tpu(const at::Tensor& t, const char* op, int device) {
  TORCH_CHECK(t.device().type() == c10::DeviceType::PrivateUse1, "tpu_dist: ", op,
              " got a tensor on ", t.device(),
              ", but tpu_dist moves tpu tensors only. Create the process group with "
              "init_process_group(backend=\"cpu:gloo,tpu:tpu_dist\") to run CPU tensors "
              "on gloo and tpu tensors on tpu_dist, or move the tensor to tpu.");
  TORCH_CHECK(!t.is_sparse(), "tpu_dist: ", op, " does not support sparse tensors");
  TORCH_CHECK(device < 0 || t.device().index() == device, "tpu_dist: ", op, " got a tensor on ",
              t.device(), ", but this rank's device in the in-program transport is tpu:", device,
              " (rank r of the process uses tpu:r)");
}

void check_tensors(const Tensors& ts, const char* op, int device) {
  TORCH_CHECK(!ts.empty(), "tpu_dist: ", op, " got no tensors");
  for (const auto& t : ts) {
    check_tpu(t, op, device);
    TORCH_CHECK(t.scalar_type() == ts[0].scalar_type(), "tpu_dist: ", op,
                " got tensors of different dtypes (", ts[0].scalar_type(), " and ", t.scalar_type(),
                ")");
  }
}

void check_list(const Tensors& list, const at::Tensor& single, const char* op, int world,
                int device) {
  TORCH_CHECK(list.size() == static_cast<size_t>(world), "tpu_dist: ", op,
              " needs a list of world_size (", world, ") tensors, got ", list.size());
  Tensors all = list;
  all.push_back(single);
  check_tensors(all, op, device);
  for (const auto& t : list)
    TORCH_CHECK(t.numel() == single.numel(), "tpu_dist: ", op,
                ": every tensor in the list must have as many elements as the single "
                "tensor (",
                single.numel(), "), got ", t.sizes());
}

void check_whole(const Tensors& whole, const Tensors& part, const char* op, const char* whole_name,
                 const char* part_name, int world, int device) {
  TORCH_CHECK(whole.size() == part.size(), "tpu_dist: ", op, " needs one ", whole_name, " per ",
              part_name);
  for (size_t i = 0; i < whole.size(); ++i) {
    check_tensors({whole[i], part[i]}, op, device);
    TORCH_CHECK(whole[i].numel() == part[i].numel() * world, "tpu_dist: ", op, ": the ", whole_name,
                " must have world_size (", world, ") times the ", part_name, "'s elements, got ",
                whole[i].sizes(), " for ", part_name, " ", part[i].sizes());
  }
}

std::string describe(const Tensors& ts) {
  std::string out;
  for (const auto& t : ts)
    out += (out.empty() ? "" : ", ") + std::string(c10::toString(t.scalar_type())) +
           c10::str(t.sizes());
  return out;
}

const c10d::PreMulSumSupplement& premul_factor(const c10d::ReduceOp& op) {
  auto* factor = dynamic_cast<c10d::PreMulSumSupplement*>(op.supplement_.get());
  TORCH_CHECK(factor != nullptr, "tpu_dist: PREMUL_SUM without a factor");
  return *factor;
}

}  // namespace torch_tpu::distributed
