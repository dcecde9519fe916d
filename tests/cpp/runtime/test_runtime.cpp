#include <atomic>
#include <chrono>
#include <cstring>
#include <map>
#include <thread>

#include "pjrt/error.h"
#include "runtime/metrics.h"
#include "runtime/runtime.h"
#include "../test_support.h"

namespace torch_tpu {
namespace {

using hlo::Builder;
using hlo::DType;
using hlo::Value;
using runtime::ExecutableCache;
using runtime::Program;
using runtime::ProgramKey;
using test::download;
using test::upload;

ProgramKey key_of(std::initializer_list<int64_t> words) {
  ProgramKey k;
  for (int64_t w : words) k.add(w);
  return k;
}

// x * k over f32[2], for a cache miss.
Program scale_program(float k) {
  Builder b;
  Value x = b.parameter({DType::F32, {2}});
  Value y = b.binary(hlo::Binary::Multiply, x, b.full(k, x.type));
  return {b.module({y}), {y.type}};
}

// A cache whose compiler counts its calls.
struct CountingCache {
  std::atomic<int> compiles{0};
  ExecutableCache cache{[this](const std::string& mlir) {
    ++compiles;
    return test::client().compile(mlir, test::compile_options());
  }};
};

std::vector<float> run_scale(const runtime::CompiledProgram& p, std::vector<float> x) {
  auto in = upload(x, {2});
  PJRT_Buffer* args[] = {in->raw()};
  auto out = p.executable()->execute(args, 1, test::client().devices()[0]);
  return download<float>(*out.at(0));
}

// The process-wide runtime with two virtual devices; configured before its first use.
runtime::Runtime& rt() {
  static runtime::Runtime& instance = []() -> runtime::Runtime& {
    runtime::Runtime::configure({test::plugin_path(), 2});
    return runtime::Runtime::get();
  }();
  return instance;
}

TEST(ProgramKey, EqualityAndHash) {
  ProgramKey a = key_of({1, 2, 3});
  ProgramKey b = key_of({1, 2, 3});
  EXPECT_TRUE(a == b);
  EXPECT_EQ(a.hash(), b.hash());
  EXPECT_EQ(runtime::ProgramKeyHash{}(a), a.hash());
  EXPECT_FALSE(a == key_of({3, 2, 1}));
  EXPECT_NE(a.hash(), key_of({3, 2, 1}).hash());
  EXPECT_FALSE(a == key_of({1, 2}));
  EXPECT_NE(ProgramKey().hash(), key_of({0}).hash());
}

TEST(ProgramKey, ListsAreLengthPrefixedAndTextIsByContent) {
  ProgramKey a, b;
  a.add(std::vector<int64_t>{1, 2});
  a.add(std::vector<int64_t>{3});
  b.add(std::vector<int64_t>{1});
  b.add(std::vector<int64_t>{2, 3});
  EXPECT_FALSE(a == b);
  std::string add1 = "add", add2 = "add";
  ProgramKey c, d, e;
  c.add(add1.c_str());
  d.add(add2.c_str());
  e.add("sub");
  EXPECT_TRUE(c == d);
  EXPECT_EQ(c.hash(), d.hash());
  EXPECT_FALSE(c == e);
}

TEST(ExecutableCache, CompilesOncePerKey) {
  CountingCache c;
  auto& m = runtime::metrics();
  int64_t hits = m.cache_hits, misses = m.cache_misses, compiles = m.compiles;
  auto first = c.cache.get(key_of({7}), [] { return scale_program(2); });
  auto again = c.cache.get(key_of({7}), [] { return scale_program(99); });  // not built
  EXPECT_EQ(first.get(), again.get());
  EXPECT_EQ(c.compiles, 1);
  EXPECT_EQ(c.cache.size(), 1u);
  EXPECT_EQ(m.cache_hits - hits, 1);
  EXPECT_EQ(m.cache_misses - misses, 1);
  EXPECT_EQ(m.compiles - compiles, 1);
  EXPECT_EQ(first->fingerprint, hlo::fingerprint(scale_program(2).mlir));
  ASSERT_EQ(first->outputs.size(), 1u);
  EXPECT_EQ(first->outputs[0].shape, (std::vector<int64_t>{2}));
  EXPECT_EQ(run_scale(*again, {1.5f, -3}), (std::vector<float>{3, -6}));

  auto other = c.cache.get(key_of({8}), [] { return scale_program(3); });
  EXPECT_EQ(c.compiles, 2);
  EXPECT_EQ(run_scale(*other, {1.5f, -3}), (std::vector<float>{4.5f, -9}));
  c.cache.clear();
  EXPECT_EQ(c.cache.size(), 0u);
}

// Tiered: a miss compiles with the first-tier compiler; tier_up (what the background
// compiler runs) compiles with the cache's own, swaps it in and retires the first.
TEST(ExecutableCache, TierUpSwapsTheOptimizedExecutableIn) {
  CountingCache c;
  std::atomic<int> first_tier{0};
  std::vector<std::shared_ptr<pjrt::Executable>> retired;
  c.cache.set_tiering(
      [&](const std::string& mlir) {
        ++first_tier;
        return test::client().compile(mlir, test::compile_options());
      },
      3, [&](std::shared_ptr<pjrt::Executable> e) { retired.push_back(std::move(e)); });
  auto& m = runtime::metrics();
  const int64_t tier_ups = m.tier_ups;
  auto p = c.cache.get(key_of({41}), [] { return scale_program(2); });
  EXPECT_EQ(first_tier, 1);
  EXPECT_EQ(c.compiles, 0);
  ASSERT_NE(p->first_tier, nullptr);
  EXPECT_EQ(p->first_tier->tier_up_runs, 3);
  EXPECT_EQ(p->first_tier->cache, &c.cache);
  const pjrt::Executable* before = p->executable().get();
  EXPECT_EQ(run_scale(*p, {1.5f, -3}), (std::vector<float>{3, -6}));

  c.cache.tier_up(p);
  EXPECT_EQ(c.compiles, 1);
  EXPECT_EQ(m.tier_ups - tier_ups, 1);
  ASSERT_EQ(retired.size(), 1u);
  EXPECT_EQ(retired[0].get(), before);
  EXPECT_NE(p->executable().get(), before);
  EXPECT_EQ(run_scale(*p, {1.5f, -3}), (std::vector<float>{3, -6}));
  c.cache.tier_up(p);  // once only
  EXPECT_EQ(c.compiles, 1);
  // The memory tier keeps the program, now optimized: a hit compiles nothing.
  EXPECT_EQ(c.cache.get(key_of({41}), [] { return scale_program(2); }).get(), p.get());
  EXPECT_EQ(first_tier, 1);
}

// A cache of `capacity` programs whose compiler counts its compiles in `compiles`.
ExecutableCache counting_cache(std::atomic<int>& compiles, size_t capacity) {
  return ExecutableCache(
      [&compiles](const std::string& mlir) {
        ++compiles;
        return test::client().compile(mlir, test::compile_options());
      },
      capacity);
}

TEST(ExecutableCache, EvictsLeastRecentlyUsedBeyondCapacity) {
  std::atomic<int> compiles{0};
  ExecutableCache cache = counting_cache(compiles, 2);
  auto build1 = [] { return scale_program(1.0f); };
  auto build2 = [] { return scale_program(2.0f); };
  auto build3 = [] { return scale_program(3.0f); };
  cache.get(key_of({1}), build1);
  cache.get(key_of({2}), build2);
  cache.get(key_of({1}), build1);  // 1 is now the most recent
  cache.get(key_of({3}), build3);  // evicts 2
  EXPECT_EQ(cache.size(), 2u);
  EXPECT_EQ(compiles, 3);
  cache.get(key_of({1}), build1);
  EXPECT_EQ(compiles, 3);
  cache.get(key_of({2}), build2);  // compiled again
  EXPECT_EQ(compiles, 4);
}

// Op mode's call memo runs programs without asking the cache; it marks them used, and
// the cache keeps them over programs nobody ran, and says (generation) when any leaves.
TEST(ExecutableCache, KeepsProgramsTheMemoRanAndCountsWhatLeaves) {
  std::atomic<int> compiles{0};
  ExecutableCache cache = counting_cache(compiles, 2);
  auto build1 = [] { return scale_program(1.0f); };
  auto build2 = [] { return scale_program(2.0f); };
  auto build3 = [] { return scale_program(3.0f); };
  auto p1 = cache.get(key_of({1}), build1);
  cache.get(key_of({2}), build2);
  EXPECT_EQ(p1->hits, 0);
  const uint64_t before = cache.generation();
  p1->memo_used = true;  // 1 is the least recently looked up, but the memo ran it
  p1->hits++;
  cache.get(key_of({3}), build3);  // evicts 2, not 1
  EXPECT_GT(cache.generation(), before);
  EXPECT_FALSE(p1->memo_used);
  cache.get(key_of({1}), build1);
  EXPECT_EQ(compiles, 3);
  EXPECT_EQ(p1->hits, 2);
  cache.get(key_of({2}), build2);  // compiled again
  EXPECT_EQ(compiles, 4);
  EXPECT_EQ(cache.size(), 2u);
  const uint64_t full = cache.generation();
  cache.clear();
  EXPECT_GT(cache.generation(), full);
}

TEST(ExecutableCache, DropsProgramsAboveTheMappingBudget) {
  std::atomic<int> compiles{0};
  ExecutableCache cache([&](const std::string& mlir) {
    ++compiles;
    return test::client().compile(mlir, test::compile_options());
  });
  int64_t mappings = 100;  // what the process "holds": under the limit at first
  int checks = 0;
  cache.set_mapping_budget({[&] {
                              ++checks;
                              return mappings;
                            },
                            /*limit=*/150});
  const int n = ExecutableCache::kMappingCheckInterval;
  for (int i = 0; i < n; ++i) cache.get(key_of({i}), [i] { return scale_program(i); });
  EXPECT_EQ(checks, 1);  // counted once per interval of misses, not per program
  EXPECT_EQ(cache.size(), static_cast<size_t>(n));
  mappings = 300;  // twice the limit
  for (int i = n; i < 2 * n; ++i) cache.get(key_of({i}), [i] { return scale_program(i); });
  EXPECT_EQ(checks, 2);
  // The check ran as the 32nd program began compiling: 32 * 0.75 * 150 / 300 = 12 stay,
  // that one included.
  EXPECT_EQ(cache.size(), 12u);
  // The most recent survive; the oldest come back by compiling again.
  int before = compiles;
  cache.get(key_of({2 * n - 2}), [] { return scale_program(-1); });
  EXPECT_EQ(compiles, before);
  auto again = cache.get(key_of({0}), [] { return scale_program(0); });
  EXPECT_EQ(compiles, before + 1);
  EXPECT_EQ(run_scale(*again, {1, 2}), (std::vector<float>{0, 0}));
}

TEST(ExecutableCache, FailuresAreNotCached) {
  CountingCache c;
  EXPECT_THROW(c.cache.get(key_of({1}), []() -> Program { throw std::runtime_error("build"); }),
               std::runtime_error);
  EXPECT_EQ(c.cache.size(), 0u);
  EXPECT_EQ(c.compiles, 0);
  EXPECT_THROW(c.cache.get(key_of({1}), [] { return Program{"garbage", {}}; }), pjrt::Error);
  EXPECT_EQ(c.cache.size(), 0u);
  EXPECT_EQ(c.compiles, 1);
  auto ok = c.cache.get(key_of({1}), [] { return scale_program(-1); });
  EXPECT_EQ(c.compiles, 2);
  EXPECT_EQ(run_scale(*ok, {2, 5}), (std::vector<float>{-2, -5}));
}

TEST(ExecutableCache, ConcurrentRequestsCompileOnce) {
  CountingCache c;
  std::atomic<int> builds{0};
  std::vector<std::shared_ptr<const runtime::CompiledProgram>> got(4);
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&, i] {
      got[i] = c.cache.get(key_of({42}), [&] {
        ++builds;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        return scale_program(10);
      });
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(builds, 1);
  EXPECT_EQ(c.compiles, 1);
  for (const auto& p : got) EXPECT_EQ(p.get(), got[0].get());
  EXPECT_EQ(run_scale(*got[3], {1, 2}), (std::vector<float>{10, 20}));
}

TEST(Metrics, FallbackCountsAndReset) {
  runtime::Metrics m;
  m.count_fallback("aten::foo");
  m.count_fallback("aten::foo");
  m.count_fallback("aten::bar");
  m.executions = 5;
  EXPECT_EQ(m.fallbacks(), (std::map<std::string, int64_t>{{"aten::bar", 1}, {"aten::foo", 2}}));
  m.reset();
  EXPECT_TRUE(m.fallbacks().empty());
  EXPECT_EQ(m.executions, 0);
  EXPECT_EQ(&runtime::metrics(), &runtime::metrics());
}

TEST(Runtime, ConfiguredWithPluginPath) {
  runtime::Runtime& r = rt();
  EXPECT_TRUE(runtime::Runtime::initialized());
  EXPECT_TRUE(runtime::Runtime::available());
  EXPECT_EQ(&runtime::Runtime::get(), &r);
  EXPECT_EQ(r.config().plugin_path, test::plugin_path());
  EXPECT_EQ(r.device_count(), 2);
  EXPECT_GT(r.memory_capacity(0), 0);
  // Too late: the runtime is loaded.
  runtime::Runtime::configure({"/nonexistent.so", 5});
  EXPECT_EQ(runtime::Runtime::get().config().num_devices, 2);
}

TEST(Runtime, ScalarCacheReusesBuffers) {
  runtime::Runtime& r = rt();
  float f = 2.5f;
  uint32_t fbits;
  std::memcpy(&fbits, &f, 4);
  auto a = r.scalar(0, DType::F32, fbits);
  auto b = r.scalar(0, DType::F32, fbits);
  EXPECT_EQ(a.get(), b.get());
  EXPECT_NE(a.get(), r.scalar(1, DType::F32, fbits).get());  // other device
  EXPECT_NE(a.get(), r.scalar(0, DType::S32, fbits).get());  // other dtype
  EXPECT_TRUE(a->dims().empty());
  EXPECT_EQ(download<float>(*a), (std::vector<float>{2.5f}));
  auto n = r.scalar(0, DType::S64, static_cast<uint64_t>(int64_t{-3}));
  EXPECT_EQ(download<int64_t>(*n), (std::vector<int64_t>{-3}));
}

TEST(Runtime, ExecuteAndSynchronize) {
  runtime::Runtime& r = rt();
  // x + s with s a 0-d runtime operand.
  auto program = r.cache().get(key_of({0x5ca1a, 1}), [] {
    Builder b;
    Value x = b.parameter({DType::F32, {3}});
    Value s = b.parameter({DType::F32, {}});
    Value y = b.binary(hlo::Binary::Add, x, b.broadcast_in_dim(s, {3}, {}));
    return Program{b.module({y}), {y.type}};
  });
  int64_t executions = runtime::metrics().executions;
  int64_t uploaded = runtime::metrics().host_to_device_bytes;
  std::vector<float> host = {1, 2, 3};
  std::shared_ptr<pjrt::Buffer> x = r.upload(host.data(), DType::F32, {3}, 1);
  EXPECT_EQ(runtime::metrics().host_to_device_bytes - uploaded, 12);
  float ten = 10;
  uint32_t bits;
  std::memcpy(&bits, &ten, 4);
  auto s = r.scalar(1, DType::F32, bits);
  auto out = r.execute(*program, {x, s}, 1);
  // Chain a second run on the first one's output before waiting.
  auto out2 = r.execute(*program, {out.at(0), s}, 1);
  r.synchronize(1);
  r.synchronize(0);
  EXPECT_EQ(runtime::metrics().executions - executions, 2);
  EXPECT_EQ(download<float>(*out[0]), (std::vector<float>{11, 12, 13}));
  EXPECT_EQ(download<float>(*out2[0]), (std::vector<float>{21, 22, 23}));
  EXPECT_THROW(r.execute(*program, {x, s}, 2), std::out_of_range);
}

}  // namespace
}  // namespace torch_tpu
