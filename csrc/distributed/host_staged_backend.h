// tpu_dist's host-staged transport: a c10d Backend for tpu tensors that copies them to
// the host, runs the collective on a CPU backend (gloo) and copies the results back.
// It serves plugins whose client cannot span processes (XLA:CPU).
#pragma once

#include <torch/csrc/distributed/c10d/Backend.hpp>

#include <chrono>

namespace torch_tpu::distributed {

// `host` runs the collectives on CPU tensors; it must span the same ranks.
c10::intrusive_ptr<c10d::Backend> make_host_staged_backend(c10::intrusive_ptr<c10d::Backend> host);

// Waits until no staged collective's completion callback is left on a gloo worker (they
// hold the caller's tensors; see host_staged_backend.cpp). False if `timeout` passed.
bool quiesce_host_staged(std::chrono::milliseconds timeout);

}  // namespace torch_tpu::distributed
