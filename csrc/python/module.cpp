// torch_tpu._C: the bindings. No logic lives here.
#include <torch/csrc/Generator.h>
#include <pybind11/stl.h>
#include <torch/extension.h>

#include "aten/allocator.h"
#include "aten/autograd_exit.h"
#include "aten/barrier_kernel.h"
#include "aten/device.h"
#include "aten/generator.h"
#include "aten/host_allocator.h"
#include "aten/lowered_kernel.h"
#include "aten/precision.h"
#include "aten/registration.h"
#include "aten/stablehlo_call_kernel.h"
#include "compile/graph.h"
#include "ops/bounded.h"
#include "ops/registry.h"
#include "pjrt/error.h"
#include "python/without_gil.h"
#include "runtime/compile_log.h"
#include "runtime/tiered_compile.h"
#include "runtime/compile_overrides.h"
#include "runtime/crash_report.h"
#include "runtime/fused_group.h"
#include "runtime/metrics.h"
#include "runtime/runtime.h"
#include "runtime/settings.h"

namespace py = pybind11;
using namespace torch_tpu;

namespace torch_tpu::python {
void bind_distributed(py::module& m);
}

namespace {

aten::TpuGenerator& generator(int device) {
  return *aten::default_generator(static_cast<c10::DeviceIndex>(device)).get<aten::TpuGenerator>();
}

// A counter's reported name: `_ns` fields are reported in seconds (runtime/metrics.h).
std::string metric_key(const std::string& field) {
  const std::string ns = "_ns";
  if (field.size() > ns.size() && field.compare(field.size() - ns.size(), ns.size(), ns) == 0)
    return field.substr(0, field.size() - ns.size()) + "_seconds";
  return field;
}

py::object metric_value(const std::string& field, int64_t v) {
  if (metric_key(field) != field) return py::float_(v / 1e9);
  return py::int_(v);
}

py::dict metrics_dict() {
  auto& m = runtime::metrics();
  py::dict d;
#define TORCH_TPU_METRIC_READ(name, doc) \
  d[py::str(metric_key(#name))] = metric_value(#name, m.name.load());
  TORCH_TPU_METRICS(TORCH_TPU_METRIC_READ)
  TORCH_TPU_PROCESS_METRICS(TORCH_TPU_METRIC_READ)
#undef TORCH_TPU_METRIC_READ
  py::dict fallbacks;
  for (const auto& [op, count] : m.fallbacks()) fallbacks[py::str(op)] = count;
  d["fallbacks"] = fallbacks;
  const runtime::DiskCacheStats* disk =
      runtime::Runtime::initialized() ? &runtime::Runtime::get().disk_cache().stats() : nullptr;
#define TORCH_TPU_DISK_METRIC_READ(name, doc) d["disk_" #name] = disk ? disk->name.load() : 0;
  TORCH_TPU_DISK_METRICS(TORCH_TPU_DISK_METRIC_READ)
#undef TORCH_TPU_DISK_METRIC_READ
  return d;
}

// {reported name: what it counts}, for torch_tpu.metrics.snapshot's docstring.
py::dict metric_docs() {
  py::dict d;
#define TORCH_TPU_METRIC_DOC(name, doc) d[py::str(metric_key(#name))] = doc;
  TORCH_TPU_METRICS(TORCH_TPU_METRIC_DOC)
  TORCH_TPU_PROCESS_METRICS(TORCH_TPU_METRIC_DOC)
#undef TORCH_TPU_METRIC_DOC
#define TORCH_TPU_DISK_METRIC_DOC(name, doc) d["disk_" #name] = doc;
  TORCH_TPU_DISK_METRICS(TORCH_TPU_DISK_METRIC_DOC)
#undef TORCH_TPU_DISK_METRIC_DOC
  d["fallbacks"] = "{op: count} of ops that ran on the CPU";
  return d;
}

// host_allocator()'s statistics, flattened as torch.cuda.host_memory_stats's are.
py::dict host_memory_stats() {
  const at::HostStats s = aten::host_allocator().get_stats();
  py::dict d;
  const std::pair<const char*, const c10::CachingAllocator::Stat*> stats[] = {
      {"active_requests", &s.active_requests},
      {"active_bytes", &s.active_bytes},
      {"allocations", &s.allocations},
      {"allocated_bytes", &s.allocated_bytes}};
  for (const auto& [name, stat] : stats) {
    const std::string key(name);
    d[py::str(key + ".current")] = stat->current;
    d[py::str(key + ".peak")] = stat->peak;
    d[py::str(key + ".allocated")] = stat->allocated;
    d[py::str(key + ".freed")] = stat->freed;
  }
  d["num_host_alloc"] = s.num_host_alloc;
  d["num_host_free"] = s.num_host_free;
  return d;
}

// runtime/settings.h's table, for torch_tpu/_settings.py.
py::list settings_table() {
  py::list out;
  for (const auto& s : runtime::settings::table()) {
    py::dict names;
    for (const auto& [word, v] : s.names) names[py::str(word)] = v;
    out.append(
        py::dict(py::arg("name") = s.name, py::arg("type") = runtime::settings::type_name(s.type),
                 py::arg("default") = s.fallback ? py::object(py::str(s.fallback)) : py::none(),
                 py::arg("doc") = s.doc, py::arg("words") = s.words, py::arg("min") = s.min,
                 py::arg("names") = names));
  }
  return out;
}

py::dict cache_stats() {
  runtime::Runtime& rt = runtime::Runtime::get();
  auto& m = runtime::metrics();
  runtime::DiskCache& disk = rt.disk_cache();
  py::dict d;
  d["memory_entries"] = rt.cache().size();
  d["memory_hits"] = m.cache_hits.load();
  d["memory_misses"] = m.cache_misses.load();
  d["memory_evictions"] = m.cache_evictions.load();
  d["compiles"] = m.compiles.load();
  d["compile_seconds"] = m.compile_ns.load() / 1e9;
  d["disk_enabled"] = disk.enabled();
  d["disk_dir"] = disk.dir();
#define TORCH_TPU_DISK_STAT(name, doc) d["disk_" #name] = disk.stats().name.load();
  TORCH_TPU_DISK_METRICS(TORCH_TPU_DISK_STAT)
#undef TORCH_TPU_DISK_STAT
  d["disk_bytes"] = disk.bytes_on_disk();
  return d;
}

py::list cache_entries() {
  py::list out;
  for (const runtime::EntryStats& e : runtime::Runtime::get().cache().entries()) {
    py::dict d;
    d["label"] = e.label;
    d["fingerprint"] = e.fingerprint;
    d["hits"] = e.hits;
    d["compile_seconds"] = e.compile_seconds;
    d["from_disk"] = e.from_disk;
    out.append(d);
  }
  return out;
}

py::list compile_log() {
  py::list out;
  for (const runtime::CompileRecord& r : runtime::CompileLog::get().records()) {
    py::dict d;
    d["what"] = r.what;
    d["signature"] = r.signature;
    d["reason"] = r.reason;
    d["disk"] = runtime::disk_outcome_name(r.disk);
    d["from_disk"] = r.from_disk();
    d["first_tier"] = r.first_tier;
    d["ms"] = r.seconds * 1e3;
    out.append(d);
  }
  return out;
}

}  // namespace

PYBIND11_MODULE(_C, m) {
  runtime::install_crash_report();
  // The end of Py_FinalizeEx, before exit() runs the plugin's static destructors.
  Py_AtExit(&runtime::Runtime::quiesce_for_exit);
  aten::register_hooks();
  aten::register_lowered_ops();

  m.def("_configure", [](const std::string& plugin_path, int64_t num_devices) {
    runtime::Runtime::configure({plugin_path, num_devices});
  });
  m.def("_is_initialized", &runtime::Runtime::initialized);
  m.def("_set_bucket_rule", &ops::set_bucket_rule);
  m.def("_shape_bucket", [](int64_t n, int64_t rule) { return ops::bucket(n, rule); });
  // The padded shape a tensor's storage is kept at (ops/bounded.h), or None.
  m.def("_padded_shape", [](const at::Tensor& t) -> py::object {
    if (!t.device().is_privateuseone()) return py::none();
    const auto& padding = aten::device_buffer(t).padding;
    return padding ? py::cast(padding->physical) : py::none();
  });
  // Ops eager mode runs through the table, and every op a compiled graph can lower.
  m.def("_lowerings", [] {
    std::vector<std::string> eager;
    for (const std::string& name : ops::lowering_names())
      if (!ops::find_lowering(name)->graph_only) eager.push_back(name);
    return eager;
  });
  m.def("_graph_lowerings", &ops::lowering_names);
  m.def("_init", [] { runtime::Runtime::get(); });
  m.def("_drain_autograd_workers",
        [] { python::without_gil([] { aten::drain_autograd_workers(); }); });
  m.def("_device_count", [] { return static_cast<int>(aten::device_count()); });
  m.def("_current_device", [] { return static_cast<int>(aten::current_device()); });
  m.def("_set_device", [](int d) { aten::set_device(static_cast<c10::DeviceIndex>(d)); });
  m.def("_synchronize", [](int d) {
    python::without_gil([d] { aten::synchronize(static_cast<c10::DeviceIndex>(d)); });
  });
  m.def("_platform", [] {
    const auto& client = runtime::Runtime::get().client();
    return py::make_tuple(client.platform_name(), client.platform_version(), client.plugin().path(),
                          client.plugin().major_version(), client.plugin().minor_version());
  });
  m.def("_device_kind", [](int d) { return runtime::Runtime::get().client().device_kind(d); });
  m.def("_memory_stats", [](int d) {
    auto stats = aten::allocator()->getDeviceStats(static_cast<c10::DeviceIndex>(d));
    py::dict out;
    out["allocated_bytes.all.current"] = stats.allocated_bytes[0].current;
    out["allocated_bytes.all.peak"] = stats.allocated_bytes[0].peak;
    out["reserved_bytes.all.current"] = stats.reserved_bytes[0].current;
    out["reserved_bytes.all.peak"] = stats.reserved_bytes[0].peak;
    out["allocation.all.current"] = stats.allocation[0].current;
    out["allocation.all.allocated"] = stats.allocation[0].allocated;
    out["allocation.all.freed"] = stats.allocation[0].freed;
    out["num_ooms"] = stats.num_ooms;
    return out;
  });
  m.def("_reset_peak_memory_stats",
        [](int d) { aten::allocator()->resetPeakStats(static_cast<c10::DeviceIndex>(d)); });
  m.def("_memory_capacity", [](int d) { return runtime::Runtime::get().memory_capacity(d); });

  m.def("_manual_seed", [](int d, uint64_t seed) { generator(d).set_current_seed(seed); });
  m.def("_manual_seed_all", [](uint64_t seed) { aten::manual_seed_all(seed); });
  m.def("_seed", [](int d) { return generator(d).seed(); });
  m.def("_initial_seed", [](int d) { return generator(d).current_seed(); });
  m.def("_get_rng_state", [](int d) {
    return at::Tensor(c10::intrusive_ptr<c10::TensorImpl>(generator(d).get_state()));
  });
  m.def("_set_rng_state", [](int d, const at::Tensor& state) {
    generator(d).set_state(*state.unsafeGetTensorImpl());
  });

  m.def("_set_cpu_fallback", &aten::set_cpu_fallback);
  m.def("_cpu_fallback_enabled", &aten::cpu_fallback_enabled);
  m.def("_metrics", &metrics_dict);
  m.def("_metric_docs", &metric_docs);
  m.def("_host_memory_stats", &host_memory_stats);
  m.def("_reset_host_memory_stats", [](bool accumulated) {
    accumulated ? aten::host_allocator().reset_accumulated_stats()
                : aten::host_allocator().reset_peak_stats();
  });
  m.def("_settings", &settings_table);
  m.def("_setting", [](const std::string& name) { return runtime::settings::value(name); });
  m.def("_fused_begin", [] { runtime::FusedGroup::get().begin(); });
  m.def("_fused_end", [] { runtime::FusedGroup::get().end(); });
  m.def("_fused_recording", [] { return runtime::FusedGroup::get().recording(); });
  m.def("_fused_pending", [] { return runtime::FusedGroup::get().pending_ops(); });
  m.def("_trace_reuse", [] { return runtime::FusedGroup::get().reuse(); });
  m.def("_set_trace_reuse", [](bool on) { runtime::FusedGroup::get().set_reuse(on); });
  m.def("_flush", [] { python::without_gil([] { runtime::FusedGroup::get().flush(); }); });
  m.def("_compile_log", &compile_log);
  // Waits until the background tier-ups queued so far are done (tiered_compile.h).
  m.def("_wait_for_tier_ups",
        [] { python::without_gil([] { runtime::BackgroundCompiler::get().wait_idle(); }); });
  m.def("_forbid_compiles", [] { runtime::CompileLog::get().forbid(); });
  m.def("_allow_compiles", [] { runtime::CompileLog::get().allow(); });
  m.def("_compiles_forbidden", [] { return runtime::CompileLog::get().forbid_depth() > 0; });
  m.def("_reset_metrics", [] {
    runtime::metrics().reset();
    runtime::CompileLog::get().clear();
    if (runtime::Runtime::initialized()) runtime::Runtime::get().disk_cache().reset_stats();
  });
  m.def("_cache_stats", &cache_stats);
  m.def("_cache_entries", &cache_entries);
  m.def("_count_graph_fallback", [] { runtime::metrics().graph_fallbacks++; });
  m.def("_count_graph_split", [] { runtime::metrics().graph_splits++; });
  m.def("_clear_cache", [](bool memory, bool disk) {
    runtime::Runtime& rt = runtime::Runtime::get();
    if (memory) {
      rt.cache().clear();
      runtime::FusedGroup::get().drop_traces();  // they hold programs
    }
    if (disk) rt.disk_cache().clear();
  });
  m.def("_cache_size", [] {
    return runtime::Runtime::initialized() ? runtime::Runtime::get().cache().size() : 0;
  });

  m.def("_push_compiler_options", [](const py::dict& options) {
    std::vector<pjrt::OptionOverride> list;
    for (auto [k, v] : options) {
      pjrt::OptionOverride o{py::str(k)};
      if (py::isinstance<py::bool_>(v))
        o.value = v.cast<bool>();
      else if (py::isinstance<py::int_>(v))
        o.value = v.cast<int64_t>();
      else if (py::isinstance<py::float_>(v))
        o.value = v.cast<double>();
      else
        o.value = v.cast<std::string>();
      list.push_back(std::move(o));
    }
    runtime::push_overrides(std::move(list));
  });
  m.def("_pop_compiler_options", &runtime::pop_overrides);
  m.def("_compiler_options", [] { return runtime::current_overrides().text; });
  m.def("_set_global_compiler_option", [](const std::string& name, bool value, bool set) {
    runtime::set_global_override({name, value}, set);
  });
  m.def("_launch_blocking", [] { return runtime::Runtime::get().launch_blocking(); });
  m.def("_set_launch_blocking", [](bool on) {
    runtime::Runtime& rt = runtime::Runtime::get();
    if (on && !rt.launch_blocking())
      for (int d = 0; d < rt.device_count(); ++d) rt.synchronize(d);
    rt.set_launch_blocking(on);
  });
  // The device's default generator as a torch.Generator (the same Python object each
  // time, as torch.cuda.default_generators gives).
  m.def("_default_generator", [](int d) {
    return py::reinterpret_steal<py::object>(THPGenerator_initDefaultGenerator(
        aten::default_generator(static_cast<c10::DeviceIndex>(d))));
  });
  m.def("_optimization_barrier", &aten::optimization_barrier);
  m.def("_call_stablehlo", &aten::call_stablehlo, py::arg("functions"), py::arg("callee"),
        py::arg("inputs"), py::arg("results"));
  m.def("_matmul_precision", [] { return static_cast<int>(aten::matmul_precision()); });
  m.def("_push_precision", [](int p) {
    TORCH_CHECK(p >= 0 && p <= 2, "torch_tpu: unknown precision ", p);
    aten::push_precision(static_cast<hlo::Precision>(p));
  });
  m.def("_pop_precision", &aten::pop_precision);

  py::class_<compile::Graph, std::shared_ptr<compile::Graph>>(m, "_Graph", py::dynamic_attr())
      .def(py::init<const py::handle&>())
      .def("__call__",
           [](const compile::Graph& g, py::list args) {
             // AOTAutograd's boxed convention: the callee empties the list, so inputs
             // can be freed as early as the graph allows. Trailing ints are the real
             // sizes of the graph's dynamic dimensions.
             std::vector<at::Tensor> inputs;
             std::vector<int64_t> sizes;
             inputs.reserve(args.size());
             for (py::handle a : args) {
               if (py::isinstance<py::int_>(a))
                 sizes.push_back(a.cast<int64_t>());
               else
                 inputs.push_back(a.cast<at::Tensor>());
             }
             args.attr("clear")();
             return g.for_current_precision().run(inputs, sizes);
           })
      .def_property_readonly("fingerprint", &compile::Graph::fingerprint)
      .def_property_readonly("num_nodes", &compile::Graph::num_nodes);

  py::register_exception<pjrt::Error>(m, "PjrtError", PyExc_RuntimeError);
  python::bind_distributed(m);
}
