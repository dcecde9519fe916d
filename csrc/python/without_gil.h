#pragma once

// Runs C++ work with the GIL released. Use it instead of pybind11's gil_scoped_release:
// that takes the GIL back in a destructor, and when the interpreter is finalizing Python
// ends a non-main thread that asks for the GIL (a daemon thread returning from
// `torch.tpu.synchronize()` at exit) by unwinding it; an unwind out of a destructor
// terminates the whole process ("terminate called without an active exception"). Here the
// GIL is taken back in a plain call, which that unwind passes through.
#include <Python.h>

#include <optional>
#include <type_traits>
#include <utility>

namespace torch_tpu::python {

// `f` must not touch Python. If the GIL is not held (a thread of ours, or the caller
// released it already), `f` simply runs.
template <typename F>
auto without_gil(F&& f) {
  if (!PyGILState_Check()) return f();
  PyThreadState* state = PyEval_SaveThread();
  if constexpr (std::is_void_v<std::invoke_result_t<F&>>) {
    try {
      f();
    } catch (...) {
      PyEval_RestoreThread(state);
      throw;
    }
    PyEval_RestoreThread(state);  // outside the try: the unwind that may start here is not caught
  } else {
    std::optional<std::invoke_result_t<F&>> result;
    try {
      result.emplace(f());
    } catch (...) {
      PyEval_RestoreThread(state);
      throw;
    }
    PyEval_RestoreThread(state);
    return std::move(*result);
  }
}

}  // namespace torch_tpu::python
