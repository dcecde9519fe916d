// Compiled graphs with functional collectives inside (TorchTPU's spmd_safe): when the
// group of a graph's collectives is served by the in-program transport, the graph is one
// program over the group's devices (replica r = group rank r, the collectives lowered by
// lower_graph_collective in collective_program.h). Each rank's thread calls the graph;
// the calls meet in the group's rendezvous as the group's next collective, and the last
// rank to arrive launches the program once over every rank's arguments.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "pjrt/buffer.h"
#include "runtime/executable_cache.h"

namespace torch_tpu::distributed {

// The tpu device of each rank of group `group_name` (resolved as c10d's functional
// collectives resolve it, on the calling thread) when tpu_dist's in-program transport
// serves it; empty when it does not (another backend, the host-staged transport, an
// unknown name).
std::vector<int> in_program_devices(const std::string& group_name);

// `build`'s program compiled over `devices` (one replica per group rank), cached per
// device assignment under `key`.
std::shared_ptr<const runtime::CompiledProgram> compile_replicated(
    const std::vector<int>& devices, const runtime::ProgramKey& key,
    const std::function<runtime::Program()>& build);

// Runs `program` (compiled over `devices`) as group `group_name`'s next collective with
// this rank's `args` (on `device`, the rank's device) and returns this rank's outputs. Blocks until
// every rank called it with the same `signature` and the launch finished; a rank that calls
// something else, or does not come within the group's timeout, makes every rank raise.
// The caller releases the GIL.
std::vector<std::shared_ptr<pjrt::Buffer>> run_replicated(
    const std::string& group_name, const std::vector<int>& devices, int device,
    const std::shared_ptr<const runtime::CompiledProgram>& program, const std::string& signature,
    std::vector<std::shared_ptr<pjrt::Buffer>> args);

}  // namespace torch_tpu::distributed
