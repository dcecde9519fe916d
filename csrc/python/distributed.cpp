// Bindings for tpu_dist (csrc/distributed).
#include <torch/extension.h>
#include <pybind11/chrono.h>
#include <pybind11/stl.h>

#include <optional>
#include <string>
#include <vector>

#include "distributed/graph_launch.h"
#include "distributed/host_staged_backend.h"
#include "distributed/in_program_backend.h"
#include "python/without_gil.h"

namespace py = pybind11;

namespace torch_tpu::python {

void bind_distributed(py::module& m) {
  // Takes and returns c10d Backends: pybind shares torch's registered Backend type.
  m.def("_host_staged_backend", [](c10::intrusive_ptr<c10d::Backend> host) {
    return distributed::make_host_staged_backend(std::move(host));
  });
  // torch_tpu calls it at exit, before the interpreter finalizes.
  m.def("_quiesce_host_staged", [](std::chrono::milliseconds timeout) {
    return without_gil([timeout] { return distributed::quiesce_host_staged(timeout); });
  });
  // `fallback` (a host-staged backend, or None) runs what the in-program transport does not.
  m.def("_in_program_backend", [](int rank, int size, std::vector<int> devices,
                                  const std::string& key, std::chrono::milliseconds timeout,
                                  std::optional<c10::intrusive_ptr<c10d::Backend>> fallback) {
    return distributed::make_in_program_backend(
        rank, size, std::move(devices), key, timeout,
        fallback ? *fallback : c10::intrusive_ptr<c10d::Backend>());
  });
  // The devices of a group's ranks when the in-program transport serves it (resolved on
  // this thread, as functional collectives resolve group names), else [].
  m.def("_in_program_devices",
        [](const std::string& group_name) { return distributed::in_program_devices(group_name); });
  m.def("_tpu_dist_transport", [](c10::intrusive_ptr<c10d::Backend> backend) {
    return distributed::transport_of(backend);
  });
}

}  // namespace torch_tpu::python
