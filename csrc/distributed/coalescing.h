// c10d's coalescing (`_coalescing_manager(device=...)`, `batch_isend_irecv`): between a
// backend's startCoalescing() and endCoalescing() its collectives start as usual, and
// endCoalescing() returns one Work that completes when all of them have. Shared by both
// tpu_dist transports.
#pragma once

#include <torch/csrc/distributed/c10d/Work.hpp>

#include <mutex>
#include <optional>
#include <vector>

namespace torch_tpu::distributed {

// One Work over `parts`, done when they all are (what endCoalescing returns).
c10::intrusive_ptr<c10d::Work> combine_works(std::vector<c10::intrusive_ptr<c10d::Work>> parts);

class Coalescing {
 public:
  using WorkPtr = c10::intrusive_ptr<c10d::Work>;
  // Raises if coalescing has started already (c10d never nests it).
  void start();
  // Returns `work`; while coalescing, also remembers it for end().
  WorkPtr record(WorkPtr work);
  // The Work of everything recorded since start(); raises if start() was not called.
  WorkPtr end();

 private:
  std::mutex mu_;
  std::optional<std::vector<WorkPtr>> works_;
};

}  // namespace torch_tpu::distributed
