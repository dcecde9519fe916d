#include "ops/bounded.h"

#include <atomic>
#include <numeric>
#include <string>
#include <unordered_set>

namespace torch_tpu::ops {

namespace {

std::atomic<int64_t> g_rule{-1};

constexpr int64_t kMinBucket = 8, kPowerOfTwoUpTo = 1024, kAboveMultiple = 128;

int64_t round_up(int64_t n, int64_t multiple) { return (n + multiple - 1) / multiple * multiple; }

// Ops whose lowering stays exact at the bound: elementwise math (padding never meets
// another element), concatenation, matrix products (the padded part of a contraction is
// zero), reductions XLA masks (sum, max, min, any, all, logsumexp) and softmax. Not here:
// mean, var and norms over a dimension (they divide by the bound), sorts, cumulative ops,
// indexing and random ops (they see positions or draw per element).
const std::unordered_set<std::string_view>& safe_ops() {
  static const std::unordered_set<std::string_view> ops = {
      // elementwise: arithmetic, comparisons, logic, selection, casts
      "add",
      "add.Tensor",
      "add.Scalar",
      "sub",
      "sub.Tensor",
      "sub.Scalar",
      "mul",
      "mul.Tensor",
      "mul.Scalar",
      "div",
      "div.Tensor",
      "div.Scalar",
      "div.Tensor_mode",
      "neg",
      "abs",
      "exp",
      "log",
      "sqrt",
      "rsqrt",
      "sin",
      "cos",
      "tanh",
      "sigmoid",
      "silu",
      "gelu",
      "relu",
      "reciprocal",
      "pow.Tensor_Scalar",
      "pow.Tensor_Tensor",
      "square",
      "clamp",
      "clamp.Tensor",
      "clamp_min",
      "clamp_max",
      "minimum",
      "maximum",
      "sign",
      "eq.Scalar",
      "eq.Tensor",
      "ne.Scalar",
      "ne.Tensor",
      "lt.Scalar",
      "lt.Tensor",
      "le.Scalar",
      "le.Tensor",
      "gt.Scalar",
      "gt.Tensor",
      "ge.Scalar",
      "ge.Tensor",
      "logical_not",
      "logical_and",
      "logical_or",
      "bitwise_not",
      "bitwise_and.Tensor",
      "bitwise_or.Tensor",
      "isneginf",
      "isposinf",
      "isinf",
      "isnan",
      "where.self",
      "masked_fill.Scalar",
      "masked_fill.Tensor",
      "_to_copy",
      "copy",
      "isin.Tensor_Tensor",
      "isin.Tensor_Scalar",
      // concatenation and matrix products
      "cat",
      "mm",
      "bmm",
      // masked reductions and softmax
      "sum",
      "sum.dim_IntList",
      "amax",
      "amin",
      "any",
      "any.dim",
      "any.dims",
      "all",
      "all.dim",
      "all.dims",
      "logsumexp",
      "_softmax",
      "_log_softmax",
      "_safe_softmax",
  };
  return ops;
}

}  // namespace

void set_bucket_rule(int64_t rule) { g_rule.store(rule); }
int64_t bucket_rule() { return g_rule.load(); }

int64_t bucket(int64_t n) { return bucket(n, g_rule.load()); }

int64_t bucket(int64_t n, int64_t rule) {
  if (rule == 0) return n;
  if (rule > 0) return round_up(n, rule);
  if (n > kPowerOfTwoUpTo) return round_up(n, kAboveMultiple);
  int64_t b = kMinBucket;
  while (b < n) b *= 2;
  return b;
}

bool bucket_safe(std::string_view name) { return safe_ops().count(name) > 0; }

hlo::Value set_dimension_size(hlo::Builder& b, const hlo::Value& x, const hlo::Value& size,
                              int64_t dim) {
  return b.emit("stablehlo.set_dimension_size", {x, size},
                "dimension = " + std::to_string(dim) + " : i64", x.type);
}

hlo::Value static_along(hlo::Builder& b, const hlo::Value& x, int64_t dim, int64_t length) {
  hlo::Value indices = b.iota({hlo::DType::S32, {length, 1}}, 0);
  std::string offset_dims, slice_sizes;
  for (int64_t d = 0; d < x.type.rank(); ++d) {
    if (d != dim) offset_dims += (offset_dims.empty() ? "" : ", ") + std::to_string(d);
    slice_sizes += (d == 0 ? "" : ", ") + std::to_string(d == dim ? 1 : x.type.shape[d]);
  }
  std::string attrs = "dimension_numbers = #stablehlo.gather<offset_dims = [" + offset_dims +
                      "], collapsed_slice_dims = [" + std::to_string(dim) +
                      "], start_index_map = [" + std::to_string(dim) +
                      "], index_vector_dim = 1>, slice_sizes = array<i64: " + slice_sizes + ">";
  hlo::TensorType type = x.type;
  type.shape.at(dim) = length;
  return b.emit("stablehlo.gather", {x, indices}, attrs, type);
}

std::optional<PaddedRead> plan_padded_read(const std::vector<int64_t>& logical,
                                           const std::vector<int64_t>& physical,
                                           const std::vector<int64_t>& dynamic,
                                           const std::vector<int64_t>& sizes,
                                           const std::vector<int64_t>& strides, int64_t offset) {
  const size_t rank = logical.size();
  if (offset != 0 || physical.size() != rank) return std::nullopt;
  PaddedRead r;
  r.physical = physical;
  // The logical dimensions that are not 1, with their row-major strides.
  std::vector<int64_t> dims, stride_of(rank);
  int64_t stride = 1;
  for (size_t i = rank; i-- > 0;) {
    stride_of[i] = stride;
    stride *= logical[i];
  }
  std::vector<bool> varies(rank, false);
  for (int64_t d : dynamic) {
    if (d < 0 || static_cast<size_t>(d) >= rank || logical[d] < 2) return std::nullopt;
    varies[d] = true;
  }
  for (size_t i = 0; i < rank; ++i) {
    if (physical[i] < logical[i] || (physical[i] != logical[i] && !varies[i])) return std::nullopt;
    if (varies[i]) {
      r.dynamic.push_back(static_cast<int64_t>(i));
      r.real.push_back(logical[i]);
    }
    if (logical[i] != 1) {
      dims.push_back(static_cast<int64_t>(i));
      r.squeezed.push_back(physical[i]);
    }
  }
  auto is_dynamic = [&](int64_t i) { return varies[i]; };
  std::vector<int> used(dims.size(), 0);
  r.bound.assign(sizes.size(), 1);
  r.probe.assign(sizes.size(), 1);
  for (size_t j = 0; j < sizes.size(); ++j) {
    if (sizes[j] == 1) continue;
    if (strides[j] == 0) {
      r.bound[j] = r.probe[j] = sizes[j];
      continue;
    }
    // The innermost logical dimension of the run: the one with this stride.
    size_t inner = dims.size();
    for (size_t k = 0; k < dims.size(); ++k)
      if (stride_of[dims[k]] == strides[j]) inner = k;
    if (inner == dims.size()) return std::nullopt;
    size_t outer = inner;
    int64_t real = logical[dims[inner]];
    while (real < sizes[j] && outer > 0) real *= logical[dims[--outer]];
    if (real != sizes[j]) return std::nullopt;
    int64_t merged = 1, probe = 1;
    for (size_t k = outer; k <= inner; ++k) {
      if (used[k]++ || (k != outer && is_dynamic(dims[k]))) return std::nullopt;
      r.permutation.push_back(static_cast<int64_t>(k));
      merged *= physical[dims[k]];
      probe *= physical[dims[k]] + (is_dynamic(dims[k]) ? 1 : 0);
    }
    r.merged.push_back(merged);
    r.bound[j] = merged;
    r.probe[j] = probe;
    r.broadcast_dims.push_back(static_cast<int64_t>(j));
  }
  for (int u : used)
    if (u != 1) return std::nullopt;
  return r;
}

hlo::Value lower_padded_read(hlo::Builder& b, const hlo::Value& flat,
                             const std::vector<hlo::Value>& sizes, const PaddedRead& read) {
  hlo::Value x = b.reshape(flat, read.physical);
  for (size_t k = 0; k < read.dynamic.size(); ++k)
    x = set_dimension_size(b, x, sizes.at(k), read.dynamic[k]);
  if (x.type.shape != read.squeezed) x = b.reshape(x, read.squeezed);
  std::vector<int64_t> identity(read.permutation.size());
  std::iota(identity.begin(), identity.end(), 0);
  if (read.permutation != identity) x = b.transpose(x, read.permutation);
  if (x.type.shape != read.merged) x = b.reshape(x, read.merged);
  if (x.type.shape != read.bound) x = b.broadcast_in_dim(x, read.bound, read.broadcast_dims);
  return x;
}

std::optional<PhysicalView> physical_view(const std::vector<int64_t>& logical,
                                          const std::vector<int64_t>& physical,
                                          const std::vector<int64_t>& sizes,
                                          const std::vector<int64_t>& strides, int64_t offset) {
  const size_t rank = logical.size();
  if (physical.size() != rank) return std::nullopt;
  std::vector<int64_t> lstride(rank), pstride(rank), index(rank);
  int64_t l = 1, p = 1;
  for (size_t i = rank; i-- > 0;) {
    lstride[i] = l;
    pstride[i] = p;
    l *= logical[i];
    p *= physical[i];
  }
  PhysicalView v{std::vector<int64_t>(sizes.size(), 0), 0};
  for (size_t i = 0; i < rank; ++i) {
    index[i] = offset / lstride[i] % logical[i];
    v.offset += index[i] * pstride[i];
  }
  std::vector<bool> used(rank, false);
  for (size_t j = 0; j < sizes.size(); ++j) {
    if (sizes[j] == 1 || strides[j] == 0) continue;
    size_t k = rank;
    for (size_t i = 0; i < rank; ++i)
      if (logical[i] > 1 && lstride[i] == strides[j]) k = i;
    if (k == rank || used[k] || index[k] + sizes[j] > logical[k]) return std::nullopt;
    used[k] = true;
    v.strides[j] = pstride[k];
  }
  return v;
}

hlo::Value unpad_flat(hlo::Builder& b, const hlo::Value& flat, const std::vector<int64_t>& logical,
                      const std::vector<int64_t>& physical) {
  hlo::Value x = b.slice(b.reshape(flat, physical), std::vector<int64_t>(physical.size(), 0),
                         logical, std::vector<int64_t>(physical.size(), 1));
  return b.reshape(x, {x.type.numel()});
}

}  // namespace torch_tpu::ops
