#include "distributed/graph_launch.h"

#include <torch/csrc/distributed/c10d/GroupRegistry.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include <any>

#include "distributed/in_program_backend.h"
#include "distributed/rendezvous.h"
#include "distributed/work.h"
#include "runtime/metrics.h"
#include "runtime/runtime.h"
#include "runtime/trace.h"

namespace torch_tpu::distributed {

namespace {

using BufferPtr = std::shared_ptr<pjrt::Buffer>;

// The group's tpu backend on this thread, or null.
c10::intrusive_ptr<c10d::Backend> tpu_backend(const std::string& group_name) {
  try {
    auto pg = c10d::resolve_process_group(group_name);
    if (!pg || !pg->hasBackendForDeviceType(c10::DeviceType::PrivateUse1)) return {};
    return pg->getBackend(c10::DeviceType::PrivateUse1);
  } catch (const c10::Error&) {
    return {};
  }
}

// One rank's part of a launch: the rendezvous's Arrival payload.
struct Launch {
  std::vector<BufferPtr> args;
  std::shared_ptr<std::vector<BufferPtr>> outputs;  // filled by the launching rank
};

}  // namespace

std::vector<int> in_program_devices(const std::string& group_name) {
  auto backend = tpu_backend(group_name);
  return backend ? in_program_devices(backend) : std::vector<int>{};
}

std::shared_ptr<const runtime::CompiledProgram> compile_replicated(
    const std::vector<int>& devices, const runtime::ProgramKey& key,
    const std::function<runtime::Program()>& build) {
  std::vector<int64_t> ids;
  runtime::Runtime& rt = runtime::Runtime::get();
  for (int d : devices) ids.push_back(rt.device_id(d));
  return replicated_cache(ids).get(key, build);
}

std::vector<BufferPtr> run_replicated(
    const std::string& group_name, const std::vector<int>& compiled_for, int device,
    const std::shared_ptr<const runtime::CompiledProgram>& program, const std::string& signature,
    std::vector<BufferPtr> args) {
  auto backend = tpu_backend(group_name);
  const std::vector<int> devices = backend ? in_program_devices(backend) : std::vector<int>{};
  TORCH_CHECK(!devices.empty(), "torch_tpu: a compiled graph with collectives on group '",
              group_name,
              "' runs on a thread where that group is not served by tpu_dist's in-program "
              "transport");
  TORCH_CHECK(devices == compiled_for, "torch_tpu: a compiled graph with collectives on group '",
              group_name, "' was compiled for ", compiled_for.size(),
              " ranks on other devices than the group has now (", devices.size(),
              " ranks); compile it again (torch._dynamo.reset())");
  const int rank = in_program_rank(backend);
  TORCH_CHECK(devices.at(rank) == device,
              "torch_tpu: a compiled graph with collectives runs on tpu:", device, ", but rank ",
              rank, " of group '", group_name, "' is on tpu:", devices.at(rank));
  auto outputs = std::make_shared<std::vector<BufferPtr>>();
  Arrival a;
  a.op = "compiled graph";
  a.signature = signature;
  a.shapes = std::to_string(args.size()) + " argument(s) on tpu:" + std::to_string(device);
  a.future = FutureWork::pending();
  auto future = a.future;
  a.payload = Launch{std::move(args), outputs};
  a.run = [program](std::vector<Arrival>& ranks) {
    std::vector<std::vector<PJRT_Buffer*>> raw(ranks.size());
    std::vector<Launch*> parts;
    for (size_t r = 0; r < ranks.size(); ++r) {
      parts.push_back(std::any_cast<Launch>(&ranks[r].payload));
      for (const BufferPtr& b : parts.back()->args) {
        b->await_ready();  // see Runtime::execute_replicated: all replicas start at once
        raw[r].push_back(b->raw());
      }
    }
    runtime::trace::Scope traced("tpu_dist::in_program_collective");
    traced.text("transport", "in-program");
    traced.text("program", program->fingerprint);
    traced.number("ranks", static_cast<double>(ranks.size()));
    auto results = runtime::Runtime::get().execute_replicated(*program->executable(), raw);
    runtime::metrics().in_program_graph_runs++;
    for (size_t r = 0; r < ranks.size(); ++r) {
      *parts[r]->outputs = std::move(results.at(r));
      ranks[r].future->markCompleted(c10::IValue(std::vector<at::Tensor>()));
    }
  };
  arrive_in_program(backend, std::move(a));
  future->wait();
  if (future->hasError()) std::rethrow_exception(future->exception_ptr());
  return *outputs;
}

}  // namespace torch_tpu::distributed
