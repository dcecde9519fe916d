// The floor under op mode's per-op time: one PJRT execute of a cached 4x4 program, with
// nothing above it (no PyTorch, no Python, no torch_tpu runtime). Built with the C++
// suites (-DTORCH_TPU_BUILD_TESTS=ON); `benchmarks/op_latency.py --floor PATH` runs it
// beside PyTorch's CPU eager figures.
//
//     torch_tpu_pjrt_floor [PLUGIN.so] [--iters 2000] [--repeats 7]
//
// For add, mul, mm, exp and sum(0) over f32[4, 4] it prints the median over `repeats` loops
// of the amortised µs per execute, as op_latency.py times a loop: `iters` executes back
// to back, each result released before the next call (as `y = a + b` in a Python loop
// releases the previous one), then one wait for the last run. Two variants: asking
// PJRT for the run's completion event (what a runtime that implements synchronize()
// does; torch_tpu does) and not asking for it.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "hlo/builder.h"
#include "pjrt/client.h"
#include "pjrt/compile_options.h"
#include "pjrt/event.h"
#include "pjrt/plugin.h"
#include "runtime/element_type.h"

namespace {

using torch_tpu::hlo::Binary;
using torch_tpu::hlo::Builder;
using torch_tpu::hlo::DType;
using torch_tpu::hlo::TensorType;
using torch_tpu::hlo::Unary;
using torch_tpu::hlo::Value;

struct Case {
  const char* name;
  int num_args;
  std::string mlir;
};

std::vector<Case> cases() {
  const TensorType t{DType::F32, {4, 4}};
  std::vector<Case> out;
  for (auto [name, op] : {std::pair{"add 4x4", Binary::Add}, {"mul 4x4", Binary::Multiply}}) {
    Builder b;
    Value x = b.parameter(t), y = b.parameter(t);
    out.push_back({name, 2, b.module({b.binary(op, x, y)})});
  }
  {
    Builder b;
    Value x = b.parameter(t), y = b.parameter(t);
    out.push_back({"mm 4x4", 2, b.module({b.dot_general(x, y, {}, {}, {1}, {0}, DType::F32)})});
  }
  {
    Builder b;
    out.push_back({"exp 4x4", 1, b.module({b.unary(Unary::Exponential, b.parameter(t))})});
  }
  {
    Builder b;
    Value x = b.parameter(t);
    Value sum = b.reduce(x, b.constant(0, DType::F32), {0}, Binary::Add);
    out.push_back({"sum 4x4", 1, b.module({sum})});
  }
  return out;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  std::string path;
  int iters = 2000, repeats = 7;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--iters") == 0 && i + 1 < argc) {
      iters = std::atoi(argv[++i]);
    } else if (std::strcmp(argv[i], "--repeats") == 0 && i + 1 < argc) {
      repeats = std::atoi(argv[++i]);
    } else {
      path = argv[i];
    }
  }
  if (path.empty()) {
    const char* env = std::getenv("TORCH_TPU_PJRT_PLUGIN");
    if (env == nullptr || *env == '\0') {
      std::fprintf(stderr, "usage: %s PLUGIN.so [--iters N] [--repeats N]\n", argv[0]);
      return 2;
    }
    path = env;
  }
  using namespace torch_tpu;
  pjrt::Client client(pjrt::Plugin::load(path), {});
  PJRT_Device* device = client.devices().at(0);
  const std::string options = pjrt::encode_compile_options(1, 1, /*portable=*/true);
  const std::vector<float> data(16, 0.5f);
  auto a = client.buffer_from_host(data.data(), runtime::to_pjrt(DType::F32), {4, 4}, 0);
  auto b = client.buffer_from_host(data.data(), runtime::to_pjrt(DType::F32), {4, 4}, 0);
  PJRT_Buffer* args[] = {a->raw(), b->raw()};

  std::printf("%s %s; us per execute, median of %d loops of %d\n",
              client.platform_name().c_str(), client.platform_version().c_str(), repeats,
              iters);
  std::printf("%-10s %14s %14s\n", "op", "with event", "without event");
  for (const Case& c : cases()) {
    auto exe = client.compile(c.mlir, options);
    double us[2];
    for (int with_event = 1; with_event >= 0; --with_event) {
      std::vector<double> loops;
      for (int r = 0; r < repeats + 1; ++r) {  // the first loop warms up
        std::shared_ptr<pjrt::Buffer> last;
        auto start = std::chrono::steady_clock::now();
        for (int i = 0; i < iters; ++i) {
          std::shared_ptr<pjrt::Event> done;
          last = std::move(exe->execute(args, c.num_args, device, with_event ? &done : nullptr)[0]);
        }
        last->await_ready();
        std::chrono::duration<double, std::micro> took = std::chrono::steady_clock::now() - start;
        if (r > 0) loops.push_back(took.count() / iters);
      }
      us[with_event] = median(loops);
    }
    std::printf("%-10s %14.2f %14.2f\n", c.name, us[1], us[0]);
  }
  return 0;
}
