#pragma once

// What the process prints when C++ terminates it (std::terminate), before the default
// handler's one line ("terminate called without an active exception") and the abort: the
// terminating thread's name and native backtrace. The usual cause in a Python process is a
// thread of the engine, of PyTorch or of ours that needed the GIL while the interpreter
// was finalizing (Python ends such a thread by unwinding it, and an unwind through a
// destructor terminates): the backtrace names that thread's last frames.
namespace torch_tpu::runtime {

// Installs the handler once (later calls do nothing); it then calls the handler that was
// installed before it.
void install_crash_report();

}  // namespace torch_tpu::runtime
