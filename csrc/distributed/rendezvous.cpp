#include "distributed/rendezvous.h"

#include <c10/util/Exception.h>

#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>

#include "distributed/checks.h"

namespace torch_tpu::distributed {

namespace {

using Clock = std::chrono::steady_clock;
using FuturePtr = c10::intrusive_ptr<c10::ivalue::Future>;

struct Slot {
  std::vector<std::optional<Arrival>> ranks;
  int arrived = 0;
  Clock::time_point deadline;
  std::string error;  // set once the slot failed: late arrivals fail at once
};

std::string describe_missing(const Slot& slot) {
  std::string missing, present;
  for (size_t r = 0; r < slot.ranks.size(); ++r)
    (slot.ranks[r] ? present : missing) +=
        ((slot.ranks[r] ? present : missing).empty() ? "" : ", ") + std::to_string(r);
  return "rank(s) " + missing + " never joined (rank(s) " + present + " did)";
}

void fail(const FuturePtr& f, const std::string& message) {
  if (f->completed()) return;
  f->setError(std::make_exception_ptr(
      c10::DistBackendError({__func__, __FILE__, static_cast<uint32_t>(__LINE__)}, message)));
}

}  // namespace

struct Rendezvous::State {
  State(int size, std::chrono::milliseconds timeout, Run run)
      : size(size), timeout(timeout), run(std::move(run)) {}

  void complete(std::vector<Arrival>& ranks) {
    const Arrival& first = ranks[0];
    bool agree = true;
    for (const auto& a : ranks) agree &= a.signature == first.signature;
    if (!agree) {
      std::string message =
          std::string("tpu_dist: ") + first.op + ": " + kRanksDisagree + ". The ranks passed:";
      for (size_t r = 0; r < ranks.size(); ++r)
        message += "\n  rank " + std::to_string(r) + ": " + ranks[r].signature + " with " +
                   ranks[r].shapes;
      for (auto& a : ranks) fail(a.future, message);
      return;
    }
    try {
      if (first.run)
        first.run(ranks);
      else
        run(ranks);
    } catch (const std::exception& e) {
      std::string message = std::string("tpu_dist: ") + first.op + " failed: " + e.what();
      for (auto& a : ranks) fail(a.future, message);
    }
  }

  // Fails the slots whose deadline passed: their ranks' Works raise instead of waiting.
  void watch() {
    std::unique_lock<std::mutex> lock(mutex);
    while (!stop) {
      Clock::time_point next = Clock::time_point::max();
      std::vector<FuturePtr> expired;
      std::string message;
      for (auto& [seq, slot] : slots) {
        if (!slot.error.empty()) continue;
        if (slot.deadline <= Clock::now()) {
          const char* op = "collective";
          for (auto& a : slot.ranks)
            if (a) op = a->op;
          slot.error = std::string("tpu_dist: ") + op + " (collective #" + std::to_string(seq) +
                       " of the group) timed out after " + std::to_string(timeout.count()) +
                       " ms: " + describe_missing(slot);
          for (auto& a : slot.ranks)
            if (a) expired.push_back(a->future);
          message = slot.error;
          // Drop the payloads now; the late ranks only need the error.
          for (auto& a : slot.ranks)
            if (a) a->payload.reset();
        } else {
          next = std::min(next, slot.deadline);
        }
      }
      if (!expired.empty()) {
        lock.unlock();
        for (const auto& f : expired) fail(f, message);
        lock.lock();
        continue;
      }
      if (next == Clock::time_point::max())
        cv.wait(lock);
      else
        cv.wait_until(lock, next);
    }
  }

  const int size;
  std::chrono::milliseconds timeout;
  const Run run;
  std::mutex mutex;
  std::condition_variable cv;
  std::map<uint64_t, Slot> slots;
  bool stop = false;
  std::thread watchdog;
};

Rendezvous::Rendezvous(int size, std::chrono::milliseconds timeout, Run run)
    : state_(std::make_unique<State>(size, timeout, std::move(run))) {
  state_->watchdog = std::thread([state = state_.get()] { state->watch(); });
}

Rendezvous::~Rendezvous() {
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    state_->stop = true;
  }
  state_->cv.notify_all();
  state_->watchdog.join();
}

void Rendezvous::set_timeout(std::chrono::milliseconds timeout) {
  std::lock_guard<std::mutex> lock(state_->mutex);
  state_->timeout = timeout;
}

void Rendezvous::arrive(int rank, uint64_t seq, Arrival arrival) {
  State& s = *state_;
  std::unique_lock<std::mutex> lock(s.mutex);
  Slot& slot = s.slots[seq];
  if (slot.ranks.empty()) {
    slot.ranks.resize(s.size);
    slot.deadline = Clock::now() + s.timeout;
    s.cv.notify_all();  // the watchdog learns the new deadline
  }
  if (!slot.error.empty()) {
    std::string error = slot.error;
    if (++slot.arrived == s.size) s.slots.erase(seq);
    lock.unlock();
    fail(arrival.future, error);
    return;
  }
  slot.ranks[rank] = std::move(arrival);
  if (++slot.arrived < s.size) return;
  std::vector<Arrival> ready;
  for (auto& a : slot.ranks) ready.push_back(std::move(*a));
  s.slots.erase(seq);
  lock.unlock();
  s.complete(ready);
}

std::shared_ptr<Rendezvous> Rendezvous::shared(const std::string& key, int size,
                                               std::chrono::milliseconds timeout, Run run) {
  static std::mutex mutex;
  static std::unordered_map<std::string, std::weak_ptr<Rendezvous>> groups;
  std::lock_guard<std::mutex> lock(mutex);
  for (auto it = groups.begin(); it != groups.end();)
    it = it->second.expired() ? groups.erase(it) : std::next(it);
  auto& weak = groups[key];
  if (auto existing = weak.lock()) return existing;
  auto created = std::make_shared<Rendezvous>(size, timeout, std::move(run));
  weak = created;
  return created;
}

}  // namespace torch_tpu::distributed
