// Events and streams on tpu devices, behind c10's DeviceGuardImplInterface (so the
// generic torch.Event / torch.Stream, DDP and FSDP2 use them).
//
// Each device has one queue: PJRT runs a program once its input buffers are ready, and a
// write swaps the storage's buffer, so every observable effect (a later read of a
// tensor, a host copy) is ordered after the work that produced it. Streams are therefore
// names for that one queue: `wait_event` has nothing to add, while recording and
// synchronizing an event are real waits on the device work enqueued before it.
#pragma once

#include <c10/core/Device.h>
#include <c10/core/Event.h>
#include <c10/core/Stream.h>

namespace torch_tpu::aten {

// The stream this thread has made current on `device` (the default stream otherwise).
c10::Stream current_stream(c10::DeviceIndex device);
// Makes `stream` current for its device on this thread; returns the previous one.
c10::Stream exchange_stream(c10::Stream stream);
// A stream distinct from the default one (by id; see above).
c10::Stream new_stream(c10::DeviceIndex device);

// `*event` (created on first use) captures the work enqueued on `device` so far.
void record_event(void** event, c10::DeviceIndex device, c10::EventFlag flag);
bool query_event(void* event);
void synchronize_event(void* event);
void destroy_event(void* event) noexcept;
// Milliseconds between the completions of two recorded, completed timing events.
double elapsed_ms(void* start, void* end);
bool query_device(c10::DeviceIndex device);

}  // namespace torch_tpu::aten
