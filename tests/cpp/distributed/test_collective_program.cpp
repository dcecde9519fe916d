// The in-program transport's collective programs, run over two virtual XLA:CPU devices of
// one client (replica r plays rank r), checked against hand-computed values.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "../test_support.h"
#include "distributed/collective_program.h"
#include "ops/registry.h"

namespace torch_tpu {
namespace {

using distributed::Collective;
using distributed::CollectiveSpec;
using distributed::Reduce;
using hlo::DType;
using test::download;
using test::upload;

// Two virtual devices: the group's ranks 0 and 1.
const pjrt::Client& two_devices() {
  static pjrt::Client instance(test::plugin(), {{"cpu_device_count", int64_t{2}}});
  return instance;
}

CollectiveSpec spec(Collective kind, const char* name, DType dtype, std::vector<int64_t> inputs,
                    std::vector<int64_t> outputs) {
  CollectiveSpec s;
  s.kind = kind;
  s.name = name;
  s.dtype = dtype;
  s.inputs = std::move(inputs);
  s.outputs = std::move(outputs);
  return s;
}

// Buffers per rank: [r] holds rank r's.
using PerRank = std::vector<std::vector<std::unique_ptr<pjrt::Buffer>>>;

// Runs `s` over both devices; args[r] are rank r's arguments (the broadcast mask
// included). Returns each rank's outputs.
PerRank run(const CollectiveSpec& s, const PerRank& args) {
  const pjrt::Client& c = two_devices();
  std::vector<int64_t> ids{c.device_id(0), c.device_id(1)};
  runtime::Program program = distributed::build_collective_program(s, 2);
  EXPECT_EQ(program.outputs.size(), s.outputs.size()) << program.mlir;
  auto exe = c.compile(program.mlir, pjrt::encode_replicated_options(ids));
  std::vector<std::vector<PJRT_Buffer*>> raw(2);
  for (int r = 0; r < 2; ++r)
    for (const auto& a : args[r]) raw[r].push_back(a->raw());
  std::vector<std::unique_ptr<pjrt::Event>> done;
  auto out = exe->execute_replicated(raw, /*launch_id=*/1, &done);
  for (auto& e : done) e->await();
  return out;
}

template <class T>
std::vector<std::unique_ptr<pjrt::Buffer>> on(int rank, std::vector<std::vector<T>> values,
                                              DType dtype = test::dtype_of<T>()) {
  std::vector<std::unique_ptr<pjrt::Buffer>> out;
  for (auto& v : values)
    out.push_back(upload<T>(v, {static_cast<int64_t>(v.size())}, dtype, two_devices(), rank));
  return out;
}

TEST(CollectiveProgram, AllReduceSumAvgMaxAndPremul) {
  for (Reduce op : {Reduce::Sum, Reduce::Avg, Reduce::Max, Reduce::PremulSum}) {
    CollectiveSpec s = spec(Collective::AllReduce, "all_reduce", DType::F32, {3, 2}, {3, 2});
    s.reduce = op;
    s.premul = 0.5;
    PerRank args;
    args.push_back(on<float>(0, {{1, 2, 3}, {-4, 8}}));
    args.push_back(on<float>(1, {{10, -20, 30}, {6, 0}}));
    PerRank out = run(s, args);
    std::vector<float> a, b;
    switch (op) {
      case Reduce::Sum: a = {11, -18, 33}, b = {2, 8}; break;
      case Reduce::Avg: a = {5.5, -9, 16.5}, b = {1, 4}; break;
      case Reduce::Max: a = {10, 2, 30}, b = {6, 8}; break;
      default: a = {5.5, -9, 16.5}, b = {1, 4}; break;  // PremulSum 0.5: half the sum
    }
    for (int r = 0; r < 2; ++r) {
      EXPECT_EQ(download<float>(*out[r].at(0)), a) << static_cast<int>(op);
      EXPECT_EQ(download<float>(*out[r].at(1)), b) << static_cast<int>(op);
    }
  }
}

// A compiled graph's collectives (lower_graph_collective) on a [4, 2] value per rank,
// along dimension 0: all_reduce max, all_gather, reduce_scatter avg, all_to_all.
TEST(CollectiveProgram, GraphCollectivesAlongDimensionZero) {
  hlo::Builder b;
  const hlo::TensorType in{DType::F32, {4, 2}};
  hlo::Value x = b.parameter(in);
  std::vector<hlo::Value> outs{
      distributed::lower_graph_collective(b, "all_reduce", "max", 2, x, in),
      distributed::lower_graph_collective(b, "all_gather_into_tensor", "", 2, x,
                                          {DType::F32, {8, 2}}),
      distributed::lower_graph_collective(b, "reduce_scatter_tensor", "avg", 2, x,
                                          {DType::F32, {2, 2}}),
      distributed::lower_graph_collective(b, "all_to_all_single", "", 2, x, in)};
  for (hlo::Value& v : outs) v = b.reshape(v, {v.type.numel()});
  const std::string mlir = b.module(outs);
  const pjrt::Client& c = two_devices();
  auto exe = c.compile(mlir, pjrt::encode_replicated_options({c.device_id(0), c.device_id(1)}));
  const std::vector<float> x0{0, 1, 2, 3, 4, 5, 6, 7}, x1{8, -1, 6, -3, 4, -5, 2, -7};
  std::vector<std::unique_ptr<pjrt::Buffer>> args;
  args.push_back(upload<float>(x0, {4, 2}, DType::F32, c, 0));
  args.push_back(upload<float>(x1, {4, 2}, DType::F32, c, 1));
  std::vector<std::vector<PJRT_Buffer*>> raw{{args[0]->raw()}, {args[1]->raw()}};
  std::vector<std::unique_ptr<pjrt::Event>> done;
  auto out = exe->execute_replicated(raw, /*launch_id=*/1, &done);
  for (auto& e : done) e->await();
  std::vector<float> gathered(x0);
  gathered.insert(gathered.end(), x1.begin(), x1.end());
  const std::vector<std::vector<float>> scattered{{4, 0, 4, 0}, {4, 0, 4, 0}},
      exchanged{{0, 1, 2, 3, 8, -1, 6, -3}, {4, 5, 6, 7, 4, -5, 2, -7}};
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(download<float>(*out[r].at(0)), (std::vector<float>{8, 1, 6, 3, 4, 5, 6, 7}));
    EXPECT_EQ(download<float>(*out[r].at(1)), gathered);
    EXPECT_EQ(download<float>(*out[r].at(2)), scattered[r]);
    EXPECT_EQ(download<float>(*out[r].at(3)), exchanged[r]);
  }
  EXPECT_THROW(
      distributed::lower_graph_collective(b, "reduce_scatter_tensor", "bor", 2,
                                          b.parameter({DType::S32, {4}}), {DType::S32, {2}}),
      ops::Unsupported);
}

TEST(CollectiveProgram, BitwiseReductionsFoldAfterAllGather) {
  const std::vector<int32_t> x{0b1100, 0b1010, 7}, y{0b1010, 0b0110, 12};
  for (Reduce op : {Reduce::BitAnd, Reduce::BitOr, Reduce::BitXor}) {
    CollectiveSpec s = spec(Collective::AllReduce, "all_reduce", DType::S32, {3}, {3});
    s.reduce = op;
    runtime::Program program = distributed::build_collective_program(s, 2);
    EXPECT_NE(program.mlir.find("stablehlo.all_gather"), std::string::npos) << program.mlir;
    PerRank args;
    args.push_back(on<int32_t>(0, {x}));
    args.push_back(on<int32_t>(1, {y}));
    PerRank out = run(s, args);
    std::vector<int32_t> want(3);
    for (int i = 0; i < 3; ++i)
      want[i] = op == Reduce::BitAnd  ? (x[i] & y[i])
                : op == Reduce::BitOr ? (x[i] | y[i])
                                      : (x[i] ^ y[i]);
    for (int r = 0; r < 2; ++r) EXPECT_EQ(download<int32_t>(*out[r].at(0)), want);
  }
}

TEST(CollectiveProgram, BoolReducesAsBytes) {
  CollectiveSpec s = spec(Collective::AllReduce, "all_reduce", DType::Pred, {3}, {3});
  s.reduce = Reduce::Product;  // logical and
  PerRank args;
  args.push_back(on<uint8_t>(0, {{1, 1, 0}}, DType::Pred));
  args.push_back(on<uint8_t>(1, {{1, 0, 0}}, DType::Pred));
  PerRank out = run(s, args);
  for (int r = 0; r < 2; ++r)
    EXPECT_EQ(download<uint8_t>(*out[r].at(0)), (std::vector<uint8_t>{1, 0, 0}));
}

TEST(CollectiveProgram, BroadcastMovesTheRootsBitsExactly) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  CollectiveSpec s = spec(Collective::Broadcast, "broadcast", DType::F32, {4}, {4});
  s.root = 1;
  PerRank args(2);
  for (int r = 0; r < 2; ++r) {
    args[r].push_back(
        upload<uint8_t>({static_cast<uint8_t>(r == 1)}, {}, DType::Pred, two_devices(), r));
    auto values = r == 1 ? on<float>(r, {{-0.0f, nan, 1.5f, -7}}) : on<float>(r, {{1, 2, 3, 4}});
    args[r].push_back(std::move(values[0]));
  }
  PerRank out = run(s, args);
  for (int r = 0; r < 2; ++r) {
    std::vector<float> got = download<float>(*out[r].at(0));
    ASSERT_EQ(got.size(), 4u);
    EXPECT_TRUE(std::signbit(got[0]) && got[0] == 0.0f);
    uint32_t bits = 0, want = 0;
    std::memcpy(&bits, &got[1], 4);
    std::memcpy(&want, &nan, 4);
    EXPECT_EQ(bits, want);
    EXPECT_EQ(got[2], 1.5f);
    EXPECT_EQ(got[3], -7.0f);
  }
}

TEST(CollectiveProgram, AllGatherWholeAndSplit) {
  for (bool split : {false, true}) {
    CollectiveSpec s = spec(Collective::AllGather, "all_gather", DType::S64, {2},
                            split ? std::vector<int64_t>{2, 2} : std::vector<int64_t>{4});
    s.split = split;
    PerRank args;
    args.push_back(on<int64_t>(0, {{1, 2}}));
    args.push_back(on<int64_t>(1, {{3, 4}}));
    PerRank out = run(s, args);
    for (int r = 0; r < 2; ++r) {
      if (split) {
        EXPECT_EQ(download<int64_t>(*out[r].at(0)), (std::vector<int64_t>{1, 2}));
        EXPECT_EQ(download<int64_t>(*out[r].at(1)), (std::vector<int64_t>{3, 4}));
      } else {
        EXPECT_EQ(download<int64_t>(*out[r].at(0)), (std::vector<int64_t>{1, 2, 3, 4}));
      }
    }
  }
}

TEST(CollectiveProgram, ReduceScatterOfJoinedPieces) {
  // The list form: two arguments per rank, joined, each rank keeps its piece of the sum.
  CollectiveSpec s = spec(Collective::ReduceScatter, "reduce_scatter", DType::F32, {2, 2}, {2});
  s.group = 2;
  PerRank args;
  args.push_back(on<float>(0, {{1, 2}, {3, 4}}));
  args.push_back(on<float>(1, {{10, 20}, {30, 40}}));
  PerRank out = run(s, args);
  EXPECT_EQ(download<float>(*out[0].at(0)), (std::vector<float>{11, 22}));
  EXPECT_EQ(download<float>(*out[1].at(0)), (std::vector<float>{33, 44}));
}

TEST(CollectiveProgram, AllToAllSplitIntoOnePiecePerRank) {
  CollectiveSpec s = spec(Collective::AllToAll, "all_to_all", DType::S32, {2, 2}, {2, 2});
  s.group = 2;
  s.split = true;
  PerRank args;
  args.push_back(on<int32_t>(0, {{1, 2}, {3, 4}}));  // rank 0 sends {1, 2} to 0, {3, 4} to 1
  args.push_back(on<int32_t>(1, {{5, 6}, {7, 8}}));
  PerRank out = run(s, args);
  EXPECT_EQ(download<int32_t>(*out[0].at(0)), (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(download<int32_t>(*out[0].at(1)), (std::vector<int32_t>{5, 6}));
  EXPECT_EQ(download<int32_t>(*out[1].at(0)), (std::vector<int32_t>{3, 4}));
  EXPECT_EQ(download<int32_t>(*out[1].at(1)), (std::vector<int32_t>{7, 8}));
}

TEST(CollectiveProgram, SignatureNamesWhatRanksMustAgreeOn) {
  CollectiveSpec s = spec(Collective::AllReduce, "all_reduce", DType::F32, {3, 2}, {3, 2});
  s.reduce = Reduce::PremulSum;
  s.premul = 0.5;
  EXPECT_EQ(distributed::signature(s), "all_reduce(op=8*0.500000, dtype=f32, in=[3,2], out=[3,2])");
  CollectiveSpec other = s;
  other.inputs = {3, 3};
  EXPECT_NE(distributed::signature(other), distributed::signature(s));
  CollectiveSpec b = spec(Collective::Broadcast, "broadcast", DType::BF16, {4}, {4});
  b.root = 1;
  EXPECT_EQ(distributed::signature(b), "broadcast(root=1, dtype=bf16, in=[4], out=[4])");
  b.root = 0;
  EXPECT_NE(distributed::signature(b), "broadcast(root=1, dtype=bf16, in=[4], out=[4])");
}

TEST(CollectiveProgram, KeyIgnoresTheRootButNotDevicesOrDtype) {
  CollectiveSpec a = spec(Collective::Broadcast, "broadcast", DType::F32, {4}, {4});
  a.root = 0;
  CollectiveSpec b = a;
  b.root = 1;
  EXPECT_EQ(distributed::program_key(a, {0, 1}), distributed::program_key(b, {0, 1}));
  EXPECT_NE(distributed::program_key(a, {0, 1}), distributed::program_key(a, {1, 3}));
  CollectiveSpec c = a;
  c.dtype = DType::F16;
  EXPECT_NE(distributed::program_key(a, {0, 1}), distributed::program_key(c, {0, 1}));
}

TEST(CollectiveProgram, WhichReductionsRunInProgram) {
  EXPECT_TRUE(distributed::can_reduce(Reduce::Sum, DType::BF16));
  EXPECT_TRUE(distributed::can_reduce(Reduce::PremulSum, DType::F32));
  EXPECT_FALSE(distributed::can_reduce(Reduce::PremulSum, DType::S32));
  EXPECT_FALSE(distributed::can_reduce(Reduce::BitAnd, DType::F32));
  EXPECT_TRUE(distributed::can_reduce(Reduce::BitXor, DType::Pred));
  EXPECT_TRUE(distributed::reduces_bitwise(Reduce::BitOr, DType::S32));
  EXPECT_FALSE(distributed::reduces_bitwise(Reduce::BitOr, DType::Pred));  // a maximum
  EXPECT_FALSE(distributed::reduces_bitwise(Reduce::Sum, DType::S32));
}

}  // namespace
}  // namespace torch_tpu
