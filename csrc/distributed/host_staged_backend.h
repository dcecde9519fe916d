// tpu_dist's host-staged transport: a c10d Backend for tpu tensors that copies them to
// the host, runs the collective on a CPU backend (gloo) and copies the results back.
// It serves plugins whose client cannot span processes (XLA:CPU).
#pragma once

#include <torch/csrc/distributed/c10d/Backend.hpp>

namespace torch_tpu::distributed {

// `host` runs the collectives on CPU tensors; it must span the same ranks.
c10::intrusive_ptr<c10d::Backend> make_host_staged_backend(c10::intrusive_ptr<c10d::Backend> host);

}  // namespace torch_tpu::distributed
