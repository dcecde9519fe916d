#include "distributed/host_staged_backend.h"

#include <ATen/ATen.h>
#include <ATen/ThreadLocalState.h>
#include <c10/core/DeviceGuard.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/Types.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

#include "aten/op_call.h"
#include "distributed/backend.h"
#include "distributed/checks.h"
#include "distributed/coalescing.h"
#include "distributed/staging_pool.h"
#include "distributed/work.h"
#include "runtime/metrics.h"
#include "runtime/settings.h"

namespace torch_tpu::distributed {

namespace {

using c10d::OpType;
using c10d::Work;
using WorkPtr = c10::intrusive_ptr<Work>;
// Copies host results into the device outputs; returns what the Work's result() is.
using Finish = std::function<Tensors()>;

// Staged collectives whose completion callback may still run on a gloo worker. The
// callback holds the caller's output tensors; if it dropped the last reference to one
// that Python created while the interpreter is finalizing, the decref would need the GIL
// and the worker thread would die in a noexcept frame (std::terminate). quiesce() waits
// for them: torch_tpu calls it at exit, before finalization.
class Inflight {
 public:
  static Inflight& get() {
    static Inflight* instance = new Inflight();  // never destroyed: workers may outlive exit
    return *instance;
  }
  void begin() {
    std::lock_guard<std::mutex> lock(mu_);
    ++count_;
  }
  void end() {
    std::lock_guard<std::mutex> lock(mu_);
    if (--count_ == 0) cv_.notify_all();
  }
  bool wait(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return count_ == 0; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int64_t count_ = 0;
};

// The results of a staged collective reach the device once the host collective is
// done, on the thread that completes it (a gloo worker), so a Future built on this Work
// (DDP's comm hook, `then` callbacks) completes without anyone calling wait(). Host work
// without a Future (gloo's reduce_scatter) finishes in wait() instead. Either way the
// copy back runs under the caller's thread-local state (inference mode, grad mode,
// dispatch keys): results written into inference tensors must be written in inference
// mode, which a gloo worker thread is not in.
class StagedWork : public FutureWork {
 public:
  StagedWork(WorkPtr host, OpType type, c10::Device device, Finish finish)
      : FutureWork(type, pending()), host_(std::move(host)), device_(device) {
    c10::intrusive_ptr<c10::ivalue::Future> host_future;
    try {
      host_future = host_->getFuture();
    } catch (const c10::Error&) {
      finish_ = std::move(finish);
      return;
    }
    // Everything the worker's callback holds, released on the worker before it counts
    // the collective as done (see Inflight).
    struct Callback {
      Finish finish;
      c10::intrusive_ptr<c10::ivalue::Future> future;
      at::ThreadLocalState tls;
      c10::Device device;
      Callback(Finish f, c10::intrusive_ptr<c10::ivalue::Future> fut,
               const at::ThreadLocalState& caller, c10::Device d)
          : finish(std::move(f)), future(std::move(fut)), tls(caller), device(d) {
        Inflight::get().begin();
      }
      ~Callback() {
        finish = nullptr;
        future.reset();
        Inflight::get().end();
      }
    };
    auto callback = std::make_shared<Callback>(std::move(finish), future_, tls_, device);
    host_future->addCallback([callback](c10::ivalue::Future& done) {
      c10::IValue result;
      std::exception_ptr error;
      try {
        done.value();  // rethrows the host collective's error
        at::ThreadLocalStateGuard caller(callback->tls);
        c10::DeviceGuard guard(callback->device);
        at::NoGradGuard no_grad;
        result = c10::IValue(callback->finish());
      } catch (...) {
        error = std::current_exception();
      }
      callback->finish = nullptr;
      if (error)
        callback->future->setError(error);
      else
        callback->future->markCompleted(std::move(result));
    });
  }
  bool wait(std::chrono::milliseconds timeout) override {
    if (finish_) {
      Finish finish = std::move(finish_);
      finish_ = nullptr;
      try {
        host_->wait(timeout);
        at::ThreadLocalStateGuard caller(tls_);
        c10::DeviceGuard guard(device_);
        at::NoGradGuard no_grad;
        future_->markCompleted(c10::IValue(finish()));
      } catch (...) {
        future_->setError(std::current_exception());
      }
    }
    return FutureWork::wait(timeout);
  }
  void abort() override { host_->abort(); }

 private:
  WorkPtr host_;
  c10::Device device_;
  at::ThreadLocalState tls_;  // the caller's, taken when the collective starts
  Finish finish_;             // set while the copy back waits for wait()
};

// A send: gloo's send work has no Future; wait() waits for the header and the payload,
// both posted at the call.
class StagedSendWork : public Work {
 public:
  StagedSendWork(Tensors messages, std::vector<WorkPtr> sends)
      : Work(-1, OpType::SEND), messages_(std::move(messages)), sends_(std::move(sends)) {}
  bool isCompleted() override { return done_; }
  bool wait(std::chrono::milliseconds timeout) override {
    for (auto& w : sends_) w->wait(timeout);
    done_ = true;
    return true;
  }

 private:
  Tensors messages_;  // the host copies, alive until sent
  std::vector<WorkPtr> sends_;
  bool done_ = false;
};

// One staged receive: a header (dtype, element count), then the payload. A gloo send
// completes only once its peer has posted the matching receive, and the receiver can post
// the payload's receive only once the header arrived (gloo aborts the process on a size
// mismatch). So the receive runs on a thread of its own from the call: were the payload's
// receive posted in wait(), two ranks that each wait for their send before their receive
// (isend; irecv; send.wait(); recv.wait()) would wait for ever. gloo matches a peer's
// messages on one tag in the order the receives were posted, so a receive posts its
// header's receive only after the previous receive on the same (peer, tag) posted its
// payload's. The thread holds host tensors only: the caller's tensor is written in
// wait(), on the caller's thread, under its thread-local state.
class Incoming {
 public:
  Incoming(int src, int tag, c10::ScalarType dtype, int64_t numel)
      : src_(src), tag_(tag), dtype_(dtype), numel_(numel) {}

  // Runs the receive on `host` (on the receive's thread), after `previous` posted.
  void run(c10d::Backend& host, int rank, const std::shared_ptr<Incoming>& previous) {
    try {
      if (previous) previous->wait_posted();
      Tensors header{at::empty({2}, at::kLong)};
      WorkPtr h =
          track(src_ < 0 ? host.recvAnysource(header, tag_) : host.recv(header, src_, tag_));
      h->wait();
      const int from = src_ < 0 ? h->sourceRank() : src_;
      const auto* p = header[0].data_ptr<int64_t>();
      const bool match = p[0] == static_cast<int64_t>(dtype_) && p[1] == numel_;
      // On a mismatch the message is taken anyway, so the sender completes and the pair
      // stays in step.
      const auto sent = static_cast<at::ScalarType>(p[0]);
      Tensors payload{at::empty({match ? numel_ : p[1]}, at::TensorOptions(match ? dtype_ : sent))};
      WorkPtr w = track(host.recv(payload, from, tag_));
      set_posted();
      w->wait();
      TORCH_CHECK(match, "tpu_dist: recv on rank ", rank, " expects ", numel_, " elements of ",
                  dtype_, " but rank ", from, " sent ", p[1], " elements of ", c10::toString(sent));
      finish(payload[0], from, nullptr);
    } catch (...) {
      finish(at::Tensor(), -1, std::current_exception());
    }
  }

  // The payload (flat, on the host) once it arrived; rethrows the receive's failure.
  // Raises if `timeout` (0: the group's own) passes first.
  at::Tensor wait(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    auto done = [&] { return done_; };
    if (timeout == ::kNoTimeout)
      cv_.wait(lock, done);
    else if (!cv_.wait_for(lock, timeout, done))
      C10_THROW_ERROR(DistBackendError,
                      c10::str("tpu_dist: recv timed out after ", timeout.count(), " ms"));
    if (error_) std::rethrow_exception(error_);
    return payload_;
  }
  bool done() {
    std::lock_guard<std::mutex> lock(mu_);
    return done_;
  }
  int source() {
    std::lock_guard<std::mutex> lock(mu_);
    return from_ >= 0 ? from_ : src_;
  }
  // Wakes the thread if it waits in gloo, and fails what it would post next (the
  // backend is destroyed).
  void abort() {
    std::lock_guard<std::mutex> lock(mu_);
    aborted_ = true;
    for (auto& w : active_) w->abort();
  }

 private:
  WorkPtr track(WorkPtr w) {
    std::lock_guard<std::mutex> lock(mu_);
    if (aborted_) w->abort();
    active_.push_back(w);
    return w;
  }
  void set_posted() {
    std::lock_guard<std::mutex> lock(mu_);
    posted_ = true;
    cv_.notify_all();
  }
  void wait_posted() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return posted_; });
  }
  void finish(at::Tensor payload, int from, std::exception_ptr error) {
    std::lock_guard<std::mutex> lock(mu_);
    payload_ = std::move(payload);
    if (from >= 0) from_ = from;
    error_ = error;
    active_.clear();
    posted_ = done_ = true;
    cv_.notify_all();
  }

  const int src_, tag_;
  const c10::ScalarType dtype_;
  const int64_t numel_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<WorkPtr> active_;
  bool posted_ = false, done_ = false, aborted_ = false;
  at::Tensor payload_;
  int from_ = -1;
  std::exception_ptr error_;
};

// The receive threads of one backend: it aborts and joins them when it is destroyed.
class Receives {
 public:
  ~Receives() {
    std::vector<Entry> entries;
    {
      std::lock_guard<std::mutex> lock(mu_);
      entries.swap(entries_);
    }
    for (auto& e : entries) e.incoming->abort();
    for (auto& e : entries) e.thread.join();
  }

  std::shared_ptr<Incoming> start(c10::intrusive_ptr<c10d::Backend> host, int rank, int src,
                                  int tag, c10::ScalarType dtype, int64_t numel) {
    auto incoming = std::make_shared<Incoming>(src, tag, dtype, numel);
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = entries_.begin(); it != entries_.end();) {
      if (it->incoming->done()) {
        it->thread.join();
        it = entries_.erase(it);
      } else {
        ++it;
      }
    }
    std::shared_ptr<Incoming> previous = last_[{src, tag}].lock();
    last_[{src, tag}] = incoming;
    entries_.push_back({incoming, std::thread([host, rank, incoming, previous] {
                          incoming->run(*host, rank, previous);
                        })});
    return incoming;
  }

 private:
  struct Entry {
    std::shared_ptr<Incoming> incoming;
    std::thread thread;
  };
  std::mutex mu_;
  std::vector<Entry> entries_;
  std::map<std::pair<int, int>, std::weak_ptr<Incoming>> last_;
};

class StagedRecvWork : public Work {
 public:
  StagedRecvWork(OpType type, at::Tensor dst, std::shared_ptr<Incoming> incoming)
      : Work(-1, type), dst_(std::move(dst)), incoming_(std::move(incoming)) {}
  bool isCompleted() override { return done_; }
  bool wait(std::chrono::milliseconds timeout) override {
    if (!done_) {
      at::Tensor payload = incoming_->wait(timeout);
      at::ThreadLocalStateGuard caller(tls_);
      c10::DeviceGuard guard(dst_.device());
      at::NoGradGuard no_grad;
      SameVersions same(std::vector<at::Tensor>{dst_});
      dst_.copy_(payload.view(dst_.sizes()));
      done_ = true;
    }
    return true;
  }
  int sourceRank() const override { return incoming_->source(); }
  std::vector<at::Tensor> result() override { return done_ ? Tensors{dst_} : Tensors(); }

 private:
  at::Tensor dst_;
  std::shared_ptr<Incoming> incoming_;
  at::ThreadLocalState tls_;  // the caller's, taken when the receive is posted
  bool done_ = false;
};

int64_t total_numel(const Tensors& ts) {
  int64_t n = 0;
  for (const auto& t : ts) n += t.numel();
  return n;
}

at::Tensor host_empty(int64_t numel, const at::Tensor& like) {
  return at::empty({numel}, like.options().device(at::kCPU));
}

// Writes consecutive pieces of the flat host buffer `src` (from `offset`) into `dsts`.
void copy_back(const at::Tensor& src, const Tensors& dsts, int64_t offset = 0) {
  SameVersions same(dsts);
  for (const auto& d : dsts) {
    d.copy_(src.narrow(0, offset, d.numel()).view(d.sizes()));
    offset += d.numel();
  }
}

// An all_reduce of at least this size goes to gloo in kChunks pieces (allreduce_chunked).
constexpr int64_t kChunkedBytes = int64_t{16} << 20;
constexpr int64_t kChunks = 4;

// Hash of what every rank must agree on for a collective to be well formed.
class Signature {
 public:
  explicit Signature(const char* op) {
    for (const char* c = op; *c; ++c) mix(static_cast<uint8_t>(*c));
  }
  Signature& add(int64_t v) {
    for (int i = 0; i < 8; ++i) mix(static_cast<uint8_t>(v >> (8 * i)));
    return *this;
  }
  Signature& add(const at::Tensor& t) {
    add(static_cast<int64_t>(t.scalar_type()));
    for (int64_t s : t.sizes()) add(s);
    return add(-1);
  }
  int64_t value() const { return static_cast<int64_t>(h_ >> 1); }

 private:
  void mix(uint8_t b) { h_ = (h_ ^ b) * 1099511628211ull; }
  uint64_t h_ = 1469598103934665603ull;
};

bool checks_enabled() {
  static const bool on = runtime::settings::flag("TORCH_TPU_DIST_CHECKS");
  return on;
}

class HostStagedBackend final : public Backend {
 public:
  explicit HostStagedBackend(c10::intrusive_ptr<c10d::Backend> host)
      : Backend(host->getRank(), host->getSize()), host_(std::move(host)) {
    runtime::metrics().host_staged_groups++;
  }

  const std::string getBackendName() const override { return "tpu_dist"; }

  WorkPtr allreduce(Tensors& tensors, const c10d::AllreduceOptions& opts) override {
    check_tensors(tensors, "all_reduce");
    Signature sig("all_reduce");
    sig.add(static_cast<int64_t>(opts.reduceOp.op_));
    for (const auto& t : tensors) sig.add(t);
    Agreement check = start_agreement(sig);
    if (tensors.size() == 1 && tensors[0].nbytes() >= kChunkedBytes)
      if (WorkPtr w = allreduce_chunked(tensors, opts, check)) return w;
    at::Tensor host = to_host_flat(tensors, pool_.get());
    agree(check, "all_reduce", tensors);
    c10d::AllreduceOptions o = opts;
    bool average = prepare_reduce(o.reduceOp, host);
    Tensors hv{host};
    int size = getSize();
    return staged(host_->allreduce(hv, o), OpType::ALLREDUCE, tensors, [=, pool = pool_] {
      if (average) divide(host, size);
      deliver_staged(host, tensors, pool);
      return tensors;
    });
  }

  WorkPtr allreduce_coalesced(Tensors& tensors,
                              const c10d::AllreduceCoalescedOptions& opts) override {
    return allreduce(tensors, opts);
  }

  WorkPtr broadcast(Tensors& tensors, const c10d::BroadcastOptions& opts) override {
    check_tensors(tensors, "broadcast");
    Signature sig("broadcast");
    sig.add(opts.rootRank);
    for (const auto& t : tensors) sig.add(t);
    Agreement check = start_agreement(sig);
    at::Tensor host = to_host_flat(tensors, pool_.get());
    agree(check, "broadcast", tensors);
    Tensors hv{host};
    c10d::BroadcastOptions o = opts;
    o.rootTensor = 0;
    return staged(host_->broadcast(hv, o), OpType::BROADCAST, tensors, [=, pool = pool_] {
      deliver_staged(host, tensors, pool);
      return tensors;
    });
  }

  WorkPtr reduce(Tensors& tensors, const c10d::ReduceOptions& opts) override {
    check_tensors(tensors, "reduce");
    Signature sig("reduce");
    sig.add(static_cast<int64_t>(opts.reduceOp.op_)).add(opts.rootRank);
    for (const auto& t : tensors) sig.add(t);
    Agreement check = start_agreement(sig);
    at::Tensor host = to_host_flat(tensors, pool_.get());
    agree(check, "reduce", tensors);
    c10d::ReduceOptions o = opts;
    o.rootTensor = 0;
    bool average = prepare_reduce(o.reduceOp, host);
    Tensors hv{host};
    bool root = getRank() == opts.rootRank;
    int size = getSize();
    return staged(host_->reduce(hv, o), OpType::REDUCE, tensors, [=, pool = pool_] {
      if (root) {
        if (average) divide(host, size);
        deliver_staged(host, tensors, pool);
      } else {
        pool->give(host);
      }
      return tensors;
    });
  }

  WorkPtr allgather(std::vector<Tensors>& outputs, Tensors& inputs,
                    const c10d::AllgatherOptions& opts) override {
    TORCH_CHECK(inputs.size() == 1 && outputs.size() == 1,
                "tpu_dist: all_gather takes one input tensor and one output list");
    check_list(outputs[0], inputs[0], "all_gather", getSize());
    std::vector<Tensors> lists{outputs[0]};
    return gather_joined(lists, inputs, "all_gather");
  }

  WorkPtr allgather_coalesced(std::vector<Tensors>& outputs, Tensors& inputs,
                              const c10d::AllgatherOptions& opts) override {
    TORCH_CHECK(outputs.size() == inputs.size(),
                "tpu_dist: all_gather_coalesced needs one output list per input");
    for (size_t i = 0; i < inputs.size(); ++i)
      check_list(outputs[i], inputs[i], "all_gather_coalesced", getSize());
    return gather_joined(outputs, inputs, "all_gather_coalesced");
  }

  WorkPtr allgather_into_tensor_coalesced(Tensors& outputs, Tensors& inputs,
                                          const c10d::AllgatherOptions& opts) override {
    std::vector<Tensors> lists =
        per_rank_pieces(outputs, inputs, "all_gather_into_tensor", "output", "input");
    Tensors result = outputs;
    return gather_joined(lists, inputs, "all_gather_into_tensor", result);
  }

  WorkPtr gather(std::vector<Tensors>& outputs, Tensors& inputs,
                 const c10d::GatherOptions& opts) override {
    TORCH_CHECK(inputs.size() == 1, "tpu_dist: gather takes one input tensor");
    check_tensors(inputs, "gather");
    bool root = getRank() == opts.rootRank;
    if (root) {
      TORCH_CHECK(outputs.size() == 1, "tpu_dist: gather needs one output list on the root");
      check_list(outputs[0], inputs[0], "gather", getSize());
    }
    agree(Signature("gather").add(opts.rootRank).add(inputs[0]), "gather", inputs);
    at::Tensor host_in = to_host(inputs[0]);
    Tensors ins{host_in};
    std::vector<Tensors> outs;
    at::Tensor host_out;
    if (root) {
      host_out = host_empty(inputs[0].numel() * getSize(), inputs[0]);
      outs.push_back(Tensors());
      for (const auto& piece : host_out.chunk(getSize()))
        outs[0].push_back(piece.view(inputs[0].sizes()));
    }
    Tensors dsts = root ? outputs[0] : Tensors();
    return staged(host_->gather(outs, ins, opts), OpType::GATHER, inputs, [=] {
      if (root) copy_back(host_out, dsts);
      return dsts;
    });
  }

  WorkPtr scatter(Tensors& outputs, std::vector<Tensors>& inputs,
                  const c10d::ScatterOptions& opts) override {
    TORCH_CHECK(outputs.size() == 1, "tpu_dist: scatter takes one output tensor");
    check_tensors(outputs, "scatter");
    bool root = getRank() == opts.rootRank;
    if (root) {
      TORCH_CHECK(inputs.size() == 1, "tpu_dist: scatter needs one input list on the root");
      check_list(inputs[0], outputs[0], "scatter", getSize());
    }
    agree(Signature("scatter").add(opts.rootRank).add(outputs[0]), "scatter", outputs);
    std::vector<Tensors> ins;
    if (root) {
      at::Tensor joined = to_host_flat(inputs[0]);
      ins.push_back(Tensors());
      for (const auto& piece : joined.chunk(getSize()))
        ins[0].push_back(piece.view(outputs[0].sizes()));
    }
    at::Tensor host_out = host_empty(outputs[0].numel(), outputs[0]);
    Tensors outs{host_out.view(outputs[0].sizes())};
    Tensors dsts = outputs;
    return staged(host_->scatter(outs, ins, opts), OpType::SCATTER, outputs, [=] {
      copy_back(host_out, dsts);
      return dsts;
    });
  }

  WorkPtr reduce_scatter(Tensors& outputs, std::vector<Tensors>& inputs,
                         const c10d::ReduceScatterOptions& opts) override {
    TORCH_CHECK(outputs.size() == 1 && inputs.size() == 1,
                "tpu_dist: reduce_scatter takes one output tensor and one input list");
    check_list(inputs[0], outputs[0], "reduce_scatter", getSize());
    Tensors outs{outputs[0]};
    std::vector<Tensors> pieces{inputs[0]};
    return reduce_scatter_joined(outs, pieces, opts, "reduce_scatter");
  }

  WorkPtr reduce_scatter_tensor_coalesced(Tensors& outputs, Tensors& inputs,
                                          const c10d::ReduceScatterOptions& opts) override {
    std::vector<Tensors> pieces =
        per_rank_pieces(inputs, outputs, "reduce_scatter_tensor", "input", "output");
    return reduce_scatter_joined(outputs, pieces, opts, "reduce_scatter_tensor");
  }

  WorkPtr alltoall_base(at::Tensor& output, at::Tensor& input, std::vector<int64_t>& output_splits,
                        std::vector<int64_t>& input_splits,
                        const c10d::AllToAllOptions& opts) override {
    check_tensors({output, input}, "all_to_all_single");
    agree(Signature("all_to_all").add(static_cast<int64_t>(input.scalar_type())),
          "all_to_all_single", {input});
    at::Tensor host_in = to_host(input);
    at::Tensor host_out = at::empty(output.sizes(), output.options().device(at::kCPU));
    std::vector<int64_t> out_splits = output_splits, in_splits = input_splits;
    Tensors dsts{output};
    return staged(host_->alltoall_base(host_out, host_in, out_splits, in_splits, opts),
                  OpType::ALLTOALL_BASE, dsts, [=] {
                    SameVersions same(dsts);
                    dsts[0].copy_(host_out);
                    return dsts;
                  });
  }

  WorkPtr alltoall(Tensors& outputs, Tensors& inputs, const c10d::AllToAllOptions& opts) override {
    TORCH_CHECK(outputs.size() == static_cast<size_t>(getSize()) &&
                    inputs.size() == static_cast<size_t>(getSize()),
                "tpu_dist: all_to_all takes world_size (", getSize(), ") input and output tensors");
    Tensors all = outputs;
    all.insert(all.end(), inputs.begin(), inputs.end());
    check_tensors(all, "all_to_all");
    agree(Signature("all_to_all").add(static_cast<int64_t>(inputs[0].scalar_type())), "all_to_all",
          inputs);
    // One flat buffer each way; the splits are the tensors' element counts.
    at::Tensor host_in = to_host_flat(inputs);
    at::Tensor host_out = host_empty(total_numel(outputs), outputs[0]);
    std::vector<int64_t> in_splits, out_splits;
    for (const auto& t : inputs) in_splits.push_back(t.numel());
    for (const auto& t : outputs) out_splits.push_back(t.numel());
    Tensors dsts = outputs;
    return staged(host_->alltoall_base(host_out, host_in, out_splits, in_splits, opts),
                  OpType::ALLTOALL, dsts, [=] {
                    copy_back(host_out, dsts);
                    return dsts;
                  });
  }

  WorkPtr send(Tensors& tensors, int dst, int tag) override {
    check_tensors(tensors, "send");
    TORCH_CHECK(tensors.size() == 1, "tpu_dist: send takes one tensor");
    // The header lets the receiver check the size before it posts the payload's
    // receive: gloo aborts the process on a size mismatch.
    Tensors header{header_of(tensors[0])};
    Tensors payload{to_host(tensors[0])};
    runtime::metrics().host_staged_collectives++;
    std::vector<WorkPtr> sends{host_->send(header, dst, tag), host_->send(payload, dst, tag)};
    return coalescing_.record(
        c10::make_intrusive<StagedSendWork>(Tensors{header[0], payload[0]}, std::move(sends)));
  }

  WorkPtr recv(Tensors& tensors, int src, int tag) override {
    return receive(tensors, src, tag, "recv");
  }

  WorkPtr recvAnysource(Tensors& tensors, int tag) override {
    return receive(tensors, -1, tag, "recv");
  }

  WorkPtr barrier(const c10d::BarrierOptions& opts) override {
    c10d::BarrierOptions o = opts;
    o.device = std::nullopt;
    o.device_ids.clear();
    return coalescing_.record(host_->barrier(o));
  }

  // c10d's _coalescing_manager(device=...) and batch_isend_irecv: the collectives start
  // at once (all_reduce, all_gather_into_tensor and reduce_scatter_tensor calls inside
  // the manager reach us already joined, as one *_coalesced call); endCoalescing's Work
  // completes when they all have.
  bool supportsCoalescing() const override { return true; }
  void startCoalescing() override { coalescing_.start(); }
  WorkPtr endCoalescing() override { return coalescing_.end(); }

  void monitoredBarrier(const c10d::BarrierOptions& opts, bool wait_all_ranks) override {
    host_->monitoredBarrier(opts, wait_all_ranks);
  }
  // DeviceMesh splits a group bound to a device (init_process_group(device_id=...))
  // with split_group: the host group splits and the part is staged as this group is.
  // The group's own gloo (for CPU tensors) splits over the same store, hence a prefix.
  bool supportsSplitting() const override { return host_->supportsSplitting(); }
  c10::intrusive_ptr<Options> getBackendOptions() override { return host_->getBackendOptions(); }
  c10::intrusive_ptr<c10d::Backend> split(const c10::intrusive_ptr<c10d::Store>& store,
                                          const std::vector<int>& ranks,
                                          const c10::intrusive_ptr<Options>& opts) override {
    auto part =
        host_->split(c10::make_intrusive<c10d::PrefixStore>("tpu_dist", store), ranks, opts);
    if (!part) return nullptr;  // this rank is not in `ranks`
    return c10::make_intrusive<HostStagedBackend>(std::move(part));
  }
  void setSequenceNumberForGroup() override { host_->setSequenceNumberForGroup(); }
  uint64_t getSequenceNumberForGroup() override { return host_->getSequenceNumberForGroup(); }
  void setTimeout(std::chrono::milliseconds timeout) override { host_->setTimeout(timeout); }
  void abort() override { host_->abort(); }
  void shutdown() override { host_->shutdown(); }

 private:
  WorkPtr staged(WorkPtr host, OpType type, const Tensors& tensors, Finish finish) {
    runtime::metrics().host_staged_collectives++;
    return coalescing_.record(c10::make_intrusive<StagedWork>(
        std::move(host), type, tensors.at(0).device(), std::move(finish)));
  }

  // Every rank passes the same signature, or every rank raises: gloo would abort the
  // process (or hang) on mismatched sizes. One small host all-reduce of (s, -s) with MAX
  // gives max(s) and -min(s), equal to s on every rank exactly when all agree. It is
  // started first and waited for once the caller has staged its tensors to the host
  // (start_agreement, then agree), so the round trip overlaps the device->host copy.
  struct Agreement {
    int64_t s = 0;
    at::Tensor pair;
    WorkPtr work;  // null when checks are off
  };
  Agreement start_agreement(const Signature& sig) {
    Agreement a;
    if (!checks_enabled()) return a;
    a.s = sig.value();
    a.pair = at::tensor(std::vector<int64_t>{a.s, -a.s});
    Tensors hv{a.pair};
    c10d::AllreduceOptions o;
    o.reduceOp = c10d::ReduceOp::MAX;
    a.work = host_->allreduce(hv, o);
    return a;
  }
  void agree(const Agreement& a, const char* op, const Tensors& tensors) {
    if (!a.work) return;
    a.work->wait();
    auto* p = a.pair.data_ptr<int64_t>();
    if (p[0] == a.s && -p[1] == a.s) return;
    TORCH_CHECK(false, "tpu_dist: ", op, " on rank ", getRank(), " with ", describe(tensors), ": ",
                kRanksDisagree);
  }
  void agree(const Signature& sig, const char* op, const Tensors& tensors) {
    agree(start_agreement(sig), op, tensors);
  }

  // A large all_reduce in kChunks pieces, where the device's memory is host memory
  // (XLA:CPU): each piece is copied to the host and its gloo all_reduce started before
  // the next piece is copied, so the copy overlaps gloo's work (64 MiB on 2 ranks:
  // 1.3-1.55x gloo on CPU tensors in one piece, 0.85-1.4x, median 1.04x, in four). Null
  // where the tensor's memory cannot be read in place; the caller stages it whole.
  WorkPtr allreduce_chunked(const Tensors& tensors, const c10d::AllreduceOptions& opts,
                            const Agreement& check) {
    const at::Tensor& t = tensors[0];
    const auto* src = static_cast<const char*>(aten::host_address(t));
    if (src == nullptr) return nullptr;
    runtime::metrics().host_staged_bytes += t.nbytes();
    at::Tensor host = pool_->take(t.numel(), t.scalar_type());
    const int64_t n = host.numel(), per = (n + kChunks - 1) / kChunks;
    const size_t elem = host.element_size();
    bool average = false;
    std::vector<WorkPtr> parts;
    for (int64_t a = 0; a < n; a += per) {
      at::Tensor piece = host.narrow(0, a, std::min(per, n - a));
      std::memcpy(piece.data_ptr(), src + a * elem, piece.nbytes());
      if (a == 0) agree(check, "all_reduce", tensors);  // before the first host collective
      c10d::AllreduceOptions o = opts;
      average = prepare_reduce(o.reduceOp, piece);
      Tensors hv{piece};
      parts.push_back(host_->allreduce(hv, o));
    }
    int size = getSize();
    return staged(combine_works(std::move(parts)), OpType::ALLREDUCE, tensors, [=, pool = pool_] {
      if (average) divide(host, size);
      deliver_staged(host, tensors, pool);
      return tensors;
    });
  }

  // AVG and PREMUL_SUM become a host SUM (gloo has neither): the factor is applied to
  // the host copy first, the average after; returns whether to divide afterwards.
  bool prepare_reduce(c10d::ReduceOp& op, at::Tensor& host) {
    switch (op.op_) {
      case c10d::ReduceOp::AVG: op = c10d::ReduceOp::SUM; return true;
      case c10d::ReduceOp::PREMUL_SUM: {
        const c10d::PreMulSumSupplement& factor = premul_factor(op);
        if (factor.tensor_factor.defined())
          host.mul_(factor.tensor_factor.to(at::kCPU));
        else
          host.mul_(factor.double_factor);
        op = c10d::ReduceOp::SUM;
        return false;
      }
      default: return false;
    }
  }

  static void divide(const at::Tensor& host, int size) {
    if (at::isFloatingType(host.scalar_type()) || at::isComplexType(host.scalar_type()))
      host.div_(size);
    else
      host.div_(size, "trunc");
  }

  // For the tensor forms: each `whole[i]` holds world_size times the elements of
  // `part[i]`; returns whole[i]'s flat pieces, one per rank.
  std::vector<Tensors> per_rank_pieces(const Tensors& whole, const Tensors& part, const char* op,
                                       const char* whole_name, const char* part_name) {
    check_whole(whole, part, op, whole_name, part_name, getSize());
    std::vector<Tensors> pieces;
    for (const auto& w : whole) pieces.push_back(w.reshape(-1).chunk(getSize()));
    return pieces;
  }

  // All-gathers any number of inputs as one host collective: each rank contributes its
  // inputs joined, so rank r's block holds its pieces in input order. `lists[i][r]`
  // receives input i of rank r.
  WorkPtr gather_joined(const std::vector<Tensors>& lists, const Tensors& inputs, const char* op,
                        Tensors result = {}) {
    check_tensors(inputs, op);
    Signature sig(op);
    for (const auto& t : inputs) sig.add(t);
    Agreement check = start_agreement(sig);
    at::Tensor host_in = to_host_flat(inputs, pool_.get());
    agree(check, op, inputs);
    int64_t block = host_in.numel();
    at::Tensor host_out = pool_->take(block * getSize(), host_in.scalar_type());
    if (result.empty())
      for (const auto& l : lists) result.insert(result.end(), l.begin(), l.end());
    int size = getSize();
    return staged(host_->_allgather_base(host_out, host_in, {}), OpType::_ALLGATHER_BASE, inputs,
                  [=, pool = pool_] {
                    // Rank-major, as the host buffer holds them.
                    Tensors dsts;
                    for (int r = 0; r < size; ++r)
                      for (const auto& l : lists) dsts.push_back(l[r]);
                    pool->give(host_in);
                    deliver_staged(host_out, dsts, pool);
                    return result;
                  });
  }

  // Reduce-scatters any number of inputs as one host collective: `pieces[i][r]` is the
  // part of input i that rank r receives in outputs[i].
  WorkPtr reduce_scatter_joined(const Tensors& outputs, const std::vector<Tensors>& pieces,
                                const c10d::ReduceScatterOptions& opts, const char* op) {
    Signature sig(op);
    sig.add(static_cast<int64_t>(opts.reduceOp.op_));
    for (const auto& t : outputs) sig.add(t);
    Agreement check = start_agreement(sig);
    // Rank-major order: rank r's block is its pieces of every input.
    Tensors ordered;
    for (int r = 0; r < getSize(); ++r)
      for (const auto& p : pieces) ordered.push_back(p[r]);
    at::Tensor host_in = to_host_flat(ordered, pool_.get());
    agree(check, op, outputs);
    c10d::ReduceScatterOptions o = opts;
    bool average = prepare_reduce(o.reduceOp, host_in);
    at::Tensor host_out = pool_->take(host_in.numel() / getSize(), host_in.scalar_type());
    Tensors dsts = outputs;
    int size = getSize();
    return staged(host_->_reduce_scatter_base(host_out, host_in, o), OpType::_REDUCE_SCATTER_BASE,
                  outputs, [=, pool = pool_]() mutable {
                    if (average) divide(host_out, size);
                    pool->give(host_in);
                    deliver_staged(host_out, dsts, pool);
                    return dsts;
                  });
  }

  static at::Tensor header_of(const at::Tensor& t) {
    return at::tensor(std::vector<int64_t>{static_cast<int64_t>(t.scalar_type()), t.numel()});
  }

  WorkPtr receive(Tensors& tensors, int src, int tag, const char* op) {
    check_tensors(tensors, op);
    TORCH_CHECK(tensors.size() == 1, "tpu_dist: recv takes one tensor");
    runtime::metrics().host_staged_collectives++;
    const at::Tensor& dst = tensors[0];
    auto incoming = receives_.start(host_, getRank(), src, tag, dst.scalar_type(), dst.numel());
    return coalescing_.record(c10::make_intrusive<StagedRecvWork>(
        src < 0 ? OpType::RECVANYSOURCE : OpType::RECV, dst, std::move(incoming)));
  }

  c10::intrusive_ptr<c10d::Backend> host_;
  Pool pool_ = std::make_shared<StagingPool>();
  Coalescing coalescing_;
  Receives receives_;  // last: its threads use host_
};

}  // namespace

bool quiesce_host_staged(std::chrono::milliseconds timeout) {
  return Inflight::get().wait(timeout);
}

c10::intrusive_ptr<c10d::Backend> make_host_staged_backend(c10::intrusive_ptr<c10d::Backend> host) {
  return c10::make_intrusive<HostStagedBackend>(std::move(host));
}

}  // namespace torch_tpu::distributed
