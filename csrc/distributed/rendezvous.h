// The process-local rendezvous of one group's ranks, for the in-program transport: each
// rank's collective call deposits its part under the call's sequence number and returns
// at once; the last rank to arrive checks that every rank made the same call and runs
// the collective. A mismatch fails every rank's Future with a message naming what each
// rank passed; ranks that do not arrive within the group's timeout fail the others'
// Futures (a watchdog thread), so nothing waits for ever.
#pragma once

#include <ATen/core/ivalue.h>

#include <any>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace torch_tpu::distributed {

// What one rank brings to a collective.
struct Arrival {
  const char* op = "collective";                   // the c10d op, for messages
  std::string signature;                           // must be equal on every rank
  std::string shapes;                              // what the rank passed, for messages
  c10::intrusive_ptr<c10::ivalue::Future> future;  // the rank's Work
  std::any payload;                                // the transport's own (arguments, targets)
  // Runs this collective instead of the group's Run (see Rendezvous::Run) when set on
  // the ranks' arrivals: a compiled program with collectives inside (graph_launch.h)
  // takes its turn in the group's sequence like any other collective.
  std::function<void(std::vector<Arrival>& ranks)> run;
};

class Rendezvous {
 public:
  // Runs a collective whose ranks all arrived and agree, on the last one's thread, and
  // completes their Futures. What it throws fails every Future ("tpu_dist: <op> failed").
  using Run = std::function<void(std::vector<Arrival>& ranks)>;

  // The rendezvous of group `key` in this process: the first rank creates it (with
  // `run`), the others share it.
  static std::shared_ptr<Rendezvous> shared(const std::string& key, int size,
                                            std::chrono::milliseconds timeout, Run run);

  Rendezvous(int size, std::chrono::milliseconds timeout, Run run);
  ~Rendezvous();

  void set_timeout(std::chrono::milliseconds timeout);
  // Deposits rank `rank`'s part of collective number `seq`; the last rank runs it.
  void arrive(int rank, uint64_t seq, Arrival arrival);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace torch_tpu::distributed
