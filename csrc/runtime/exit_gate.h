// Process exit with device work in flight. exit() runs the plugin's static destructors
// (XLA:CPU's unmap the code its kernels were JIT-compiled into) while the plugin's threads
// may still be running that code: a segfault. A daemon thread inside
// torch.tpu.synchronize(), or a script that ends without waiting for its last ops, is
// enough. So before the C exit handlers run, Runtime::quiesce_for_exit() closes this gate
// and then waits for the work already enqueued: every call that starts plugin work
// (compile, launch, upload) holds a Pass; close() waits for the passes held, and any other
// thread that asks for one afterwards (a daemon thread still running C++) is parked until
// the process ends.
#pragma once

#include <chrono>

namespace torch_tpu::runtime {

class ExitGate {
 public:
  class Pass {
   public:
    Pass();  // parks the calling thread for good if the gate is closed (see above)
    ~Pass();
    Pass(const Pass&) = delete;
    Pass& operator=(const Pass&) = delete;
  };
  // Refuses new passes, then waits up to `timeout` for those held. The calling thread
  // itself still gets passes (it may free or touch buffers while the process ends).
  // Returns whether every pass was given back in time.
  static bool close(std::chrono::milliseconds timeout);
  static bool closed();
};

}  // namespace torch_tpu::runtime
