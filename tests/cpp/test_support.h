// Shared helpers for the C++ suites: locating the PJRT plugin, one client per process,
// and running a built module on host data.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "hlo/builder.h"
#include "pjrt/client.h"
#include "pjrt/compile_options.h"
#include "runtime/element_type.h"

namespace torch_tpu::test {

// TORCH_TPU_PJRT_PLUGIN if set, else the xla-cpu-pjrt plugin CMake found at configure time.
inline std::string plugin_path() {
  if (const char* env = std::getenv("TORCH_TPU_PJRT_PLUGIN"); env != nullptr && *env != '\0')
    return env;
  return TORCH_TPU_TEST_PLUGIN;
}

inline std::shared_ptr<pjrt::Plugin> plugin() {
  static std::shared_ptr<pjrt::Plugin> instance = pjrt::Plugin::load(plugin_path());
  return instance;
}

// A one-device client shared by the suites (creating one costs tens of milliseconds).
inline const pjrt::Client& client() {
  static pjrt::Client instance(plugin(), {{"cpu_device_count", int64_t{1}}});
  return instance;
}

inline std::string compile_options() { return pjrt::encode_compile_options(1, 1, true); }

template <class T>
constexpr hlo::DType dtype_of();
template <>
constexpr hlo::DType dtype_of<float>() {
  return hlo::DType::F32;
}
template <>
constexpr hlo::DType dtype_of<double>() {
  return hlo::DType::F64;
}
template <>
constexpr hlo::DType dtype_of<int8_t>() {
  return hlo::DType::S8;
}
template <>
constexpr hlo::DType dtype_of<int32_t>() {
  return hlo::DType::S32;
}
template <>
constexpr hlo::DType dtype_of<int64_t>() {
  return hlo::DType::S64;
}
template <>
constexpr hlo::DType dtype_of<uint8_t>() {
  return hlo::DType::U8;
}
template <>
constexpr hlo::DType dtype_of<uint32_t>() {
  return hlo::DType::U32;
}

// Host data on device `device` of `c`. `dtype` overrides the element type (uint8_t
// data as Pred).
template <class T>
std::unique_ptr<pjrt::Buffer> upload(const std::vector<T>& data, const std::vector<int64_t>& dims,
                                     hlo::DType dtype = dtype_of<T>(),
                                     const pjrt::Client& c = client(), size_t device = 0) {
  return c.buffer_from_host(data.data(), runtime::to_pjrt(dtype), dims, device);
}

template <class T>
std::vector<T> download(const pjrt::Buffer& buffer) {
  int64_t n = 1;
  for (int64_t d : buffer.dims()) n *= d;
  std::vector<T> out(static_cast<size_t>(n));
  if (n > 0) buffer.to_host(out.data(), out.size() * sizeof(T));
  return out;
}

inline std::vector<PJRT_Buffer*> raw(const std::vector<const pjrt::Buffer*>& args) {
  std::vector<PJRT_Buffer*> out;
  for (const pjrt::Buffer* a : args) out.push_back(a->raw());
  return out;
}

// Compiles `b`'s module returning `outputs` and runs it once on device 0 of client().
inline std::vector<std::shared_ptr<pjrt::Buffer>> run(
    const hlo::Builder& b, const std::vector<hlo::Value>& outputs,
    const std::vector<const pjrt::Buffer*>& args) {
  const pjrt::Client& c = client();
  auto exe = c.compile(b.module(outputs), compile_options());
  std::vector<PJRT_Buffer*> raw_args = raw(args);
  return exe->execute(raw_args.data(), raw_args.size(), c.devices().at(0));
}

// The single output of `b`'s module as host values of type T.
template <class T>
std::vector<T> run1(const hlo::Builder& b, const hlo::Value& output,
                    const std::vector<const pjrt::Buffer*>& args = {}) {
  auto out = run(b, {output}, args);
  return download<T>(*out.at(0));
}

}  // namespace torch_tpu::test
