// tpu_dist's in-program transport: a c10d Backend whose collectives are StableHLO
// collectives (all_reduce, all_gather, reduce_scatter, all_to_all) in one program run
// over the group's devices (collective_program.h). It serves ranks that live in one
// process and share one PJRT client (threads, rank r on its own device, e.g. XLA:CPU's
// virtual devices).
//
// The ranks of a group meet in a process-local rendezvous (rendezvous.h): each collective
// call deposits its signature and input buffers and returns a Work at once. The last rank
// to arrive launches ONE PJRT_LoadedExecutable_Execute over the N devices with N argument
// lists and waits for it (Runtime::execute_replicated: queued collective launches
// deadlock XLA:CPU); each rank's outputs become its tensors' new buffers. A mismatch or
// a rank that does not arrive within the group's timeout fails every rank's Work with a
// RuntimeError, so nothing waits for ever or reaches the plugin's own rendezvous abort.
#pragma once

#include <torch/csrc/distributed/c10d/Backend.hpp>

#include <chrono>
#include <string>
#include <vector>

#include "distributed/rendezvous.h"
#include "runtime/executable_cache.h"

namespace torch_tpu::distributed {

// `devices[r]` is the tpu device index of group rank r; `group_key` names the group
// (the same string on every rank, unique in the process). Ops the transport does not
// run in-program (reduce, gather, scatter, send/recv, uneven all_to_all) go to
// `fallback` (a host-staged backend over the same ranks), or raise if it is null.
c10::intrusive_ptr<c10d::Backend> make_in_program_backend(
    int rank, int size, std::vector<int> devices, const std::string& group_key,
    std::chrono::milliseconds timeout, c10::intrusive_ptr<c10d::Backend> fallback);

// The executable cache of programs compiled over the devices with global ids `ids`, one
// replica each (replica r on ids[r]); the runtime's own cache compiles portable
// one-device programs.
runtime::ExecutableCache& replicated_cache(const std::vector<int64_t>& ids);

// For an in-program backend: the tpu device of each group rank, and this backend's
// rank; empty and -1 for any other backend.
std::vector<int> in_program_devices(const c10::intrusive_ptr<c10d::Backend>& backend);
int in_program_rank(const c10::intrusive_ptr<c10d::Backend>& backend);
// Deposits `arrival` (with its own Arrival::run) as this rank's next collective of the
// in-program group `backend` serves, after the rank's pending fused work; throws for
// any other backend.
void arrive_in_program(const c10::intrusive_ptr<c10d::Backend>& backend, Arrival arrival);

// "in_program" or "host_staged" for a tpu_dist backend, "" for any other backend.
std::string transport_of(const c10::intrusive_ptr<c10d::Backend>& backend);

}  // namespace torch_tpu::distributed
