#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <memory>
#include <thread>

#include "pjrt/error.h"
#include "pjrt/event.h"
#include "../test_support.h"

namespace torch_tpu {
namespace {

using hlo::DType;
using hlo::TensorType;
using test::client;
using test::download;
using test::plugin;
using test::upload;

// x + 1 over f32[3].
std::string add_one_module() {
  hlo::Builder b;
  hlo::Value x = b.parameter({DType::F32, {3}});
  return b.module({b.binary(hlo::Binary::Add, x, b.full(1, x.type))});
}

TEST(Plugin, LoadReportsApiZeroDotX) {
  auto p = plugin();
  EXPECT_EQ(p->major_version(), 0);
  EXPECT_GT(p->minor_version(), 0);
  EXPECT_EQ(p->path(), test::plugin_path());
  EXPECT_NE(p->api(), nullptr);
}

TEST(Plugin, MissingFileNamesThePath) {
  const std::string path = "/nonexistent/dir/libno_such_plugin.so";
  try {
    pjrt::Plugin::load(path);
    FAIL() << "expected pjrt::Error";
  } catch (const pjrt::Error& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
}

TEST(Plugin, LibraryWithoutGetPjrtApiIsRejected) {
  try {
    pjrt::Plugin::load("libm.so.6");
    FAIL() << "expected pjrt::Error";
  } catch (const pjrt::Error& e) {
    std::string what = e.what();
    EXPECT_NE(what.find("libm.so.6"), std::string::npos) << what;
    EXPECT_NE(what.find("GetPjrtApi"), std::string::npos) << what;
  }
}

TEST(CompileOptions, HandEncodedBytes) {
  // ExecutableBuildOptions {device_ordinal: -1 (10-byte varint), num_replicas: 1,
  // num_partitions: 1} in field 3, then compile_portable_executable (field 4) = 1.
  const unsigned char expected[] = {0x1A, 0x0F, 0x08, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF,
                                    0xFF, 0xFF, 0x01, 0x20, 0x01, 0x28, 0x01, 0x20, 0x01};
  EXPECT_EQ(pjrt::encode_compile_options(1, 1, true),
            std::string(reinterpret_cast<const char*>(expected), sizeof(expected)));
  // Without portability the trailing field is absent; 200 replicas is a 2-byte varint.
  const unsigned char replicas[] = {0x1A, 0x10, 0x08, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF,
                                    0xFF, 0xFF, 0xFF, 0x01, 0x20, 0xC8, 0x01, 0x28, 0x01};
  EXPECT_EQ(pjrt::encode_compile_options(200, 1, false),
            std::string(reinterpret_cast<const char*>(replicas), sizeof(replicas)));
}

TEST(CompileOptions, OverridesAreMapEntries) {
  // env_option_overrides (field 7) holds one map entry per option: key (field 1), and
  // the OptionOverrideProto value (field 2) with int_field 3 / bool_field 2.
  const std::string base = pjrt::encode_compile_options(1, 1, false);
  const std::string with =
      pjrt::encode_compile_options(1, 1, false, {{"opt", int64_t{2}}, {"flag", true}});
  const unsigned char entries[] = {0x3A, 0x09, 0x0A, 0x03, 'o',  'p',  't',  0x12,
                                   0x02, 0x18, 0x02, 0x3A, 0x0A, 0x0A, 0x04, 'f',
                                   'l',  'a',  'g',  0x12, 0x02, 0x10, 0x01};
  EXPECT_EQ(with, base + std::string(reinterpret_cast<const char*>(entries), sizeof(entries)));
}

TEST(CompileOptions, ThePluginAppliesOverrides) {
  // A real option compiles; an unknown one is the plugin's clear error, not an abort.
  auto options = [](const char* name) {
    return pjrt::encode_compile_options(1, 1, false, {{name, int64_t{0}}});
  };
  EXPECT_NO_THROW(client().compile(add_one_module(), options("xla_backend_optimization_level")));
  EXPECT_THROW(client().compile(add_one_module(), options("xla_no_such_option")), pjrt::Error);
}

TEST(Event, NullEventIsReady) {
  pjrt::Event e(plugin().get(), nullptr);
  EXPECT_TRUE(e.is_ready());
  e.await();
}

TEST(Client, HasDevicesAndPlatform) {
  const pjrt::Client& c = client();
  ASSERT_GE(c.devices().size(), 1u);
  EXPECT_EQ(c.platform_name(), "cpu");
  EXPECT_FALSE(c.device_kind(0).empty());
  EXPECT_THROW(c.device_kind(c.devices().size()), pjrt::Error);
  int64_t in_use = -1, limit = -1;
  c.memory_stats(0, &in_use, &limit);  // XLA:CPU may not implement it; must not throw
}

TEST(Client, TwoVirtualDevicesRunPortableExecutableOnDeviceOne) {
  pjrt::Client c(plugin(), {{"cpu_device_count", int64_t{2}}});
  ASSERT_EQ(c.devices().size(), 2u);
  auto exe = c.compile(add_one_module(), test::compile_options());
  auto x = upload<float>({1, 2, 3}, {3}, DType::F32, c, /*device=*/1);
  PJRT_Buffer* args[] = {x->raw()};
  auto out = exe->execute(args, 1, c.devices()[1]);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(download<float>(*out[0]), (std::vector<float>{2, 3, 4}));
  EXPECT_THROW(upload<float>({1}, {1}, DType::F32, c, /*device=*/2), pjrt::Error);
}

TEST(Client, GarbageTextThrowsPluginMessage) {
  try {
    client().compile("this is not mlir", test::compile_options());
    FAIL() << "expected pjrt::Error";
  } catch (const pjrt::Error& e) {
    std::string what = e.what();
    const std::string prefix = "PJRT_Client_Compile failed: ";
    ASSERT_EQ(what.rfind(prefix, 0), 0u) << what;
    EXPECT_GT(what.size(), prefix.size()) << "the plugin's message is missing";
    EXPECT_NE(e.code(), PJRT_Error_Code_OK);
  }
}

TEST(Client, EmptyCompileOptionsThrowInsteadOfAborting) {
  EXPECT_THROW(client().compile(add_one_module(), ""), pjrt::Error);
}

TEST(Client, InvalidElementTypeThrows) {
  float x = 0;
  EXPECT_THROW(client().buffer_from_host(&x, PJRT_Buffer_Type_INVALID, {}, 0), pjrt::Error);
  EXPECT_THROW(client().buffer_from_host(&x, PJRT_Buffer_Type_TOKEN, {}, 0), pjrt::Error);
}

TEST(Buffer, DimsTypeSizeAndRoundTrip) {
  auto b = upload<int32_t>({1, -2, 3, -4, 5, -6}, {2, 3});
  EXPECT_EQ(b->dims(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(b->element_type(), PJRT_Buffer_Type_S32);
  EXPECT_EQ(b->on_device_size(), 24u);
  b->await_ready();
  EXPECT_EQ(download<int32_t>(*b), (std::vector<int32_t>{1, -2, 3, -4, 5, -6}));

  int32_t small[2];
  try {
    b->to_host(small, sizeof(small));
    FAIL() << "expected pjrt::Error";
  } catch (const pjrt::Error& e) {
    EXPECT_NE(std::string(e.what()).find("PJRT_Buffer_ToHostBuffer failed"), std::string::npos);
  }

  auto s = upload<double>({2.5}, {});
  EXPECT_TRUE(s->dims().empty());
  EXPECT_EQ(s->element_type(), PJRT_Buffer_Type_F64);
  EXPECT_EQ(download<double>(*s), (std::vector<double>{2.5}));
}

// What the host-staged collectives rely on (csrc/distributed/host_staged_backend.cpp):
// on XLA:CPU a view is the host memory itself, programs read it in place, and its
// on-delete callback runs once the buffer is destroyed, not before. The plugin may run it
// on one of its threads a moment after the destruction (when a program that used the
// buffer lets go of it), so the test waits for it, boundedly.
TEST(Buffer, ViewOfHostMemoryIsThatMemoryUntilDestroyed) {
  alignas(64) float data[3] = {1, 2, 3};
  auto deleted = std::make_shared<std::atomic<bool>>(false);
  auto view = client().view_of_memory(data, PJRT_Buffer_Type_F32, {3}, 0,
                                      [deleted] { deleted->store(true); });
  ASSERT_NE(view, nullptr);
  EXPECT_TRUE(view->borrowed());
  EXPECT_EQ(view->unsafe_pointer(), static_cast<void*>(data));
  data[1] = 20;  // no copy was taken
  auto exe = client().compile(add_one_module(), test::compile_options());
  PJRT_Buffer* args[] = {view->raw()};
  auto out = exe->execute(args, 1, client().devices().at(0));
  EXPECT_EQ(download<float>(*out[0]), (std::vector<float>{2, 21, 4}));
  EXPECT_EQ(download<float>(*view), (std::vector<float>{1, 20, 3}));
  EXPECT_FALSE(deleted->load());
  view.reset();
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!deleted->load() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_TRUE(deleted->load());  // `data` must outlive the view: this frame still holds it
}

TEST(Buffer, UnsafePointerIsTheContents) {
  auto b = upload<int32_t>({7, -8, 9}, {3});
  EXPECT_FALSE(b->borrowed());
  b->await_ready();
  const void* p = b->unsafe_pointer();
  ASSERT_NE(p, nullptr);
  int32_t got[3];
  std::memcpy(got, p, sizeof(got));
  EXPECT_EQ(std::vector<int32_t>(got, got + 3), (std::vector<int32_t>{7, -8, 9}));
}

TEST(Executable, TwoOutputs) {
  hlo::Builder b;
  hlo::Value x = b.parameter({DType::F32, {2}});
  hlo::Value y = b.parameter({DType::F32, {2}});
  auto exe = client().compile(
      b.module({b.binary(hlo::Binary::Add, x, y), b.binary(hlo::Binary::Multiply, x, y)}),
      test::compile_options());
  EXPECT_EQ(exe->num_outputs(), 2u);
  auto bx = upload<float>({2, 3}, {2});
  auto by = upload<float>({5, -1}, {2});
  PJRT_Buffer* args[] = {bx->raw(), by->raw()};
  auto out = exe->execute(args, 2, client().devices()[0]);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(download<float>(*out[0]), (std::vector<float>{7, 2}));
  EXPECT_EQ(download<float>(*out[1]), (std::vector<float>{10, -3}));
}

TEST(Executable, SerializeDeserializeGivesSameResults) {
  auto exe = client().compile(add_one_module(), test::compile_options());
  std::string bytes = exe->serialize();
  ASSERT_FALSE(bytes.empty());
  auto again = client().deserialize(bytes);
  EXPECT_EQ(again->num_outputs(), 1u);
  auto x = upload<float>({-1, 0, 41}, {3});
  PJRT_Buffer* args[] = {x->raw()};
  auto a = exe->execute(args, 1, client().devices()[0]);
  auto b = again->execute(args, 1, client().devices()[0]);
  EXPECT_EQ(download<float>(*a[0]), (std::vector<float>{0, 1, 42}));
  EXPECT_EQ(download<float>(*b[0]), (std::vector<float>{0, 1, 42}));
}

TEST(Executable, CompletionEventFires) {
  auto exe = client().compile(add_one_module(), test::compile_options());
  auto x = upload<float>({0, 1, 2}, {3});
  PJRT_Buffer* args[] = {x->raw()};
  std::shared_ptr<pjrt::Event> done;
  auto out = exe->execute(args, 1, client().devices()[0], &done);
  ASSERT_NE(done, nullptr);
  done->await();
  EXPECT_TRUE(done->is_ready());
  EXPECT_EQ(download<float>(*out[0]), (std::vector<float>{1, 2, 3}));
}

TEST(Executable, NonPortableRunsOnItsDevice) {
  auto exe = client().compile(add_one_module(), pjrt::encode_compile_options(1, 1, false));
  auto x = upload<float>({5, 6, 7}, {3});
  PJRT_Buffer* args[] = {x->raw()};
  auto out = exe->execute(args, 1, client().devices()[0]);
  EXPECT_EQ(download<float>(*out[0]), (std::vector<float>{6, 7, 8}));
}

TEST(Executable, WrongArgumentsThrow) {
  auto exe = client().compile(add_one_module(), test::compile_options());
  EXPECT_THROW(exe->execute(nullptr, 0, client().devices()[0]), pjrt::Error);
  auto wrong = upload<float>({1, 2}, {2});
  PJRT_Buffer* args[] = {wrong->raw()};
  EXPECT_THROW(exe->execute(args, 1, client().devices()[0]), pjrt::Error);
}

TEST(Executable, DeserializeGarbageThrows) {
  EXPECT_THROW(client().deserialize("not an executable"), pjrt::Error);
}

// Bounded dynamic dimensions, as compiled graphs use them (csrc/compile/graph.h): a
// parameter of the bound marked with its real size by set_dimension_size, every later
// type static. XLA keeps the padding out of reductions, dots, softmax, flattening and
// sort; a gather of every index makes an output a plain buffer of the bound again.
TEST(BoundedDynamic, StaticTypesAfterSetDimensionSizeStayExact) {
  const std::string module = R"(
module @bounded {
  func.func public @main(%x: tensor<8x4xf32>, %n: tensor<i32>) -> (tensor<f32>, tensor<8x4xf32>, tensor<f32>, tensor<8x4xf32>, tensor<8x4xf32>) {
    %d = "stablehlo.set_dimension_size"(%x, %n) {dimension = 0 : i64} : (tensor<8x4xf32>, tensor<i32>) -> tensor<8x4xf32>
    %z = stablehlo.constant dense<0.0> : tensor<f32>
    %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
    %sum = "stablehlo.reduce"(%d, %z) ({
      ^bb0(%a: tensor<f32>, %b: tensor<f32>):
        %t = "stablehlo.add"(%a, %b) : (tensor<f32>, tensor<f32>) -> tensor<f32>
        "stablehlo.return"(%t) : (tensor<f32>) -> ()
    }) {dimensions = array<i64: 0, 1>} : (tensor<8x4xf32>, tensor<f32>) -> tensor<f32>
    %mx = "stablehlo.reduce"(%d, %ninf) ({
      ^bb0(%a: tensor<f32>, %b: tensor<f32>):
        %t = "stablehlo.maximum"(%a, %b) : (tensor<f32>, tensor<f32>) -> tensor<f32>
        "stablehlo.return"(%t) : (tensor<f32>) -> ()
    }) {dimensions = array<i64: 0>} : (tensor<8x4xf32>, tensor<f32>) -> tensor<4xf32>
    %mb = "stablehlo.broadcast_in_dim"(%mx) {broadcast_dimensions = array<i64: 1>} : (tensor<4xf32>) -> tensor<8x4xf32>
    %ex = "stablehlo.exponential"(%d) : (tensor<8x4xf32>) -> tensor<8x4xf32>
    %den = "stablehlo.reduce"(%ex, %z) ({
      ^bb0(%a: tensor<f32>, %b: tensor<f32>):
        %t = "stablehlo.add"(%a, %b) : (tensor<f32>, tensor<f32>) -> tensor<f32>
        "stablehlo.return"(%t) : (tensor<f32>) -> ()
    }) {dimensions = array<i64: 0>} : (tensor<8x4xf32>, tensor<f32>) -> tensor<4xf32>
    %db = "stablehlo.broadcast_in_dim"(%den) {broadcast_dimensions = array<i64: 1>} : (tensor<4xf32>) -> tensor<8x4xf32>
    %soft = "stablehlo.divide"(%ex, %db) : (tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<8x4xf32>
    %flat = "stablehlo.reshape"(%d) : (tensor<8x4xf32>) -> tensor<32xf32>
    %fsum = "stablehlo.reduce"(%flat, %z) ({
      ^bb0(%a: tensor<f32>, %b: tensor<f32>):
        %t = "stablehlo.add"(%a, %b) : (tensor<f32>, tensor<f32>) -> tensor<f32>
        "stablehlo.return"(%t) : (tensor<f32>) -> ()
    }) {dimensions = array<i64: 0>} : (tensor<32xf32>, tensor<f32>) -> tensor<f32>
    %srt = "stablehlo.sort"(%d) ({
      ^bb0(%a: tensor<f32>, %b: tensor<f32>):
        %t = "stablehlo.compare"(%a, %b) {comparison_direction = #stablehlo<comparison_direction GT>} : (tensor<f32>, tensor<f32>) -> tensor<i1>
        "stablehlo.return"(%t) : (tensor<i1>) -> ()
    }) {dimension = 0 : i64, is_stable = true} : (tensor<8x4xf32>) -> tensor<8x4xf32>
    %idx = "stablehlo.iota"() {iota_dimension = 0 : i64} : () -> tensor<8x1xi32>
    %plain = "stablehlo.gather"(%soft, %idx) {dimension_numbers = #stablehlo.gather<offset_dims = [1], collapsed_slice_dims = [0], start_index_map = [0], index_vector_dim = 1>, slice_sizes = array<i64: 1, 4>} : (tensor<8x4xf32>, tensor<8x1xi32>) -> tensor<8x4xf32>
    %srt_plain = "stablehlo.gather"(%srt, %idx) {dimension_numbers = #stablehlo.gather<offset_dims = [1], collapsed_slice_dims = [0], start_index_map = [0], index_vector_dim = 1>, slice_sizes = array<i64: 1, 4>} : (tensor<8x4xf32>, tensor<8x1xi32>) -> tensor<8x4xf32>
    return %sum, %mb, %fsum, %plain, %srt_plain : tensor<f32>, tensor<8x4xf32>, tensor<f32>, tensor<8x4xf32>, tensor<8x4xf32>
  }
}
)";
  // Rows 0..2 hold 0, 1, 2; the padding rows 100 (they must never count).
  std::vector<float> x(32);
  for (int i = 0; i < 32; ++i) x[i] = i < 12 ? static_cast<float>(i / 4) : 100.f;
  auto bx = upload(x, {8, 4});
  auto bn = upload(std::vector<int32_t>{3}, {});
  auto exe = client().compile(module, test::compile_options());
  std::vector<PJRT_Buffer*> args = {bx->raw(), bn->raw()};
  auto out = exe->execute(args.data(), args.size(), client().devices().at(0));
  EXPECT_EQ(download<float>(*out[0])[0], 12.f);  // 4 * (0 + 1 + 2)
  EXPECT_EQ(download<float>(*out[1])[0], 2.f);   // max over the real rows
  EXPECT_EQ(download<float>(*out[2])[0], 12.f);  // the same sum, flattened first
  const double total = 1 + std::exp(1.0) + std::exp(2.0);
  // The gathered outputs are plain buffers a static program takes.
  hlo::Builder b;
  hlo::Value p = b.parameter({DType::F32, {8, 4}});
  auto soft = download<float>(
      *test::run(b, {b.binary(hlo::Binary::Add, p, b.full(0, p.type))}, {out[3].get()})[0]);
  auto sorted = download<float>(
      *test::run(b, {b.binary(hlo::Binary::Add, p, b.full(0, p.type))}, {out[4].get()})[0]);
  for (int r = 0; r < 3; ++r) {
    EXPECT_NEAR(soft[r * 4], std::exp(static_cast<double>(r)) / total, 1e-6) << r;
    EXPECT_EQ(sorted[r * 4], static_cast<float>(2 - r)) << r;
  }
}

}  // namespace
}  // namespace torch_tpu
