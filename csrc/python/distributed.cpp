// Bindings for tpu_dist (csrc/distributed).
#include <torch/extension.h>

#include "distributed/host_staged_backend.h"

namespace py = pybind11;

namespace torch_tpu::python {

void bind_distributed(py::module& m) {
  // Takes and returns c10d Backends: pybind shares torch's registered Backend type.
  m.def("_host_staged_backend", [](c10::intrusive_ptr<c10d::Backend> host) {
    return distributed::make_host_staged_backend(std::move(host));
  });
}

}  // namespace torch_tpu::python
