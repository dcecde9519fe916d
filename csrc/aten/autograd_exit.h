// Autograd's tpu worker threads at interpreter exit.
//
// A backward that touches tpu runs its tpu nodes on the autograd engine's worker thread
// for that device. That thread marks the graph task finished and wakes the caller before
// it lets go of the task, so the caller's script can end and Python start finalizing
// while the worker still holds the last reference. Dropping it then releases Python
// objects the task carries (the caller's thread-local state, such as saved-tensor hooks,
// or the tensors `autograd.grad` returned), which asks for the GIL; a finalizing Python
// ends such a thread by unwinding it, and the unwind out of a destructor terminates the
// process ("terminate called without an active exception"), about 1 run in 10 for a
// compiled backward under saved-tensor hooks.
//
// drain_autograd_workers() runs before finalization begins (an atexit function registered
// by torch_tpu/__init__.py), with the GIL released: from a fresh thread, whose
// thread-local state holds no Python object, it runs one backward per tpu device that
// runs nothing on the device (a root node that does nothing). A worker takes that task
// only after it has dropped every earlier one (taking the GIL for it if needed), so once
// each has finished, no worker holds a Python object.
#pragma once

namespace torch_tpu::aten {

// Call without the GIL. Never throws; gives up after 30 s (a worker stuck in a backward
// that never ends); a no-op before the runtime starts or in a child process that did not
// start it.
void drain_autograd_workers() noexcept;

}  // namespace torch_tpu::aten
