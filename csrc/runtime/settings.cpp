#include "runtime/settings.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <sstream>

namespace torch_tpu::runtime::settings {

namespace {

const std::vector<std::string> kTrue = {"1", "true", "yes", "on"};
const std::vector<std::string> kFalse = {"0", "false", "no", "off"};

std::vector<Setting> make_table() {
  using T = Type;
  return {
      {"TORCH_TPU_PJRT_PLUGIN", T::text, nullptr,
       "path of the PJRT plugin `.so` (default: libtpu if installed, else xla-cpu-pjrt)"},
      {"TORCH_TPU_NUM_DEVICES",
       T::integer,
       nullptr,
       "virtual devices of the XLA:CPU plugin (default: `LOCAL_WORLD_SIZE` under a launcher "
       "such as torchrun, else 1)",
       {},
       1},
      {"TORCH_TPU_DEVICES_PER_HOST",
       T::integer,
       nullptr,
       "devices per host that `torch.tpu.distributed.set_tpu_launch_env` gives each host of a "
       "multi-host launch (default: this host's device count)",
       {},
       1},
      {"TORCH_TPU_CPU_FALLBACK", T::flag, "0",
       "run ops without a tpu lowering on the CPU (also `torch_tpu.set_cpu_fallback(True)`)"},
      {"TORCH_TPU_LAUNCH_BLOCKING", T::flag, "0", "wait for every op (debugging)"},
      {"TORCH_TPU_DUMP_DIR", T::text, nullptr,
       "write the StableHLO of each compiled program there, as `<fingerprint>.mlir`"},
      {"TORCH_TPU_CACHE_DIR", T::text, nullptr,
       "disk cache of compiled programs (default `~/.cache/torch_tpu`)"},
      {"TORCH_TPU_CACHE_MAX_BYTES",
       T::integer,
       "4294967296",
       "size cap of the disk cache in bytes (4 GiB), least recently used entries go first",
       {},
       1},
      {"TORCH_TPU_DISK_CACHE", T::flag, "1", "`0` turns the disk cache off"},
      {"TORCH_TPU_VERBOSE", T::flag, "0",
       "let the PJRT plugin print its own log lines (quiet by default; `TF_CPP_MIN_LOG_LEVEL` "
       "is honoured too)"},
      {"TORCH_TPU_CACHE_ENTRIES",
       T::integer,
       "4096",
       "compiled programs kept loaded in memory, least recently used dropped first",
       {},
       1},
      {"TORCH_TPU_MAX_MAPPINGS", T::integer, nullptr,
       "memory mappings the process may hold before loaded programs are dropped, least "
       "recently used first (default: half of `vm.max_map_count`; `0`: no limit)"},
      {"TORCH_TPU_EAGER_MODE",
       T::choice,
       nullptr,
       "`op` (the default: one program per op) or `fused` (ops are recorded and run as one "
       "program when a result is needed; also `torch_tpu.set_eager_mode(\"fused\")`)",
       {"op", "fused"}},
      {"TORCH_TPU_DEFER_AND_FUSE", T::flag, "0",
       "`1` is TorchTPU's name for `TORCH_TPU_EAGER_MODE=fused` (when that is unset)"},
      {"TORCH_TPU_FUSED_MAX_OPS",
       T::integer,
       "4096",
       "ops a fused group records before it runs by itself",
       {},
       1},
      {"TORCH_TPU_FUSED_REUSE", T::flag, "1",
       "`0`: a fused group that repeats an earlier one is recorded and keyed in full, op by "
       "op (trace reuse off, to measure what it saves)"},
      {"TORCH_TPU_FAST_COMPILE_ELEMENTS", T::integer, "65536",
       "programs whose largest tensor has at most this many elements compile with XLA's fast "
       "options (backend optimization level 1 and, on XLA:CPU, the older fusion emitters: "
       "about a third less compile time, the same run time; `0` turns it off)"},
      {"TORCH_TPU_TIERED_COMPILE",
       T::integer,
       "0",
       "tiered compilation, off by default: `N` (e.g. `8`) compiles a new program at XLA's "
       "cheapest level (about 0.75x the compile time) and, once it has run N times, again at "
       "its full level in the background; results before the swap may differ in the last "
       "bit (`docs/performance.md`); `0` or `off`: every program compiles at its full level",
       {},
       0,
       {{"off", 0}}},
      {"TORCH_TPU_DONATE", T::flag, "1",
       "`0`: never donate overwritten buffers to programs (to measure what donation saves)"},
      {"TORCH_TPU_LOG",
       T::words,
       "",
       "`compiles`: print one line per program compiled or loaded from disk: what (op, fused "
       "group or graph), its argument and result types, why it was not cached (new program, "
       "new shape, new dtype, new attributes, evicted; disk miss or corrupt entry) and the "
       "milliseconds; `torch_tpu.metrics.compile_log()` returns the same records",
       {"compiles"}},
      {"TORCH_TPU_SHAPE_BUCKETS",
       T::integer,
       "default",
       "sizes that vary compile at their bucket: `off`, or an integer to round up to a "
       "multiple of (`default`: the next power of two from 8 to 1,024, then multiples of "
       "128; see `docs/compiles.md`)",
       {},
       0,
       {{"default", -1}, {"pow2", -1}, {"off", 0}, {"none", 0}}},
      {"TORCH_TPU_NO_COMPILE", T::flag, "0",
       "any XLA compile or Dynamo recompile raises a `RuntimeError` naming what and why "
       "(loads from the disk cache are allowed); `with torch_tpu.no_compile():` does the same "
       "for a region"},
      {"TORCH_TPU_DIST_TRANSPORT",
       T::choice,
       "auto",
       "`tpu_dist`'s transport: `auto` (in-program where the ranks share one client, else "
       "host-staged), `host` or `in_program`; see `docs/distributed.md`",
       {"auto", "host", "in_program"}},
      {"TORCH_TPU_DIST_CHECKS", T::flag, "1",
       "`0` skips the host-staged per-collective check that all ranks pass the same shapes"},
      {"TORCH_TPU_VLLM_EAGER", T::flag, "0",
       "vLLM plugin: run the model steps op by op (as `enforce_eager=True`)"},
      {"TORCH_TPU_SGLANG_EAGER", T::flag, "0",
       "SGLang plugin: run the model steps op by op instead of compiled"},
      {"TORCH_TPU_SGLANG_STATS", T::text, nullptr,
       "SGLang plugin: a file the scheduler writes its compile counts to (JSON)"},
  };
}

std::string lower_trimmed(const char* raw) {
  std::string s(raw);
  const auto space = [](unsigned char c) { return std::isspace(c) != 0; };
  s.erase(s.begin(), std::find_if_not(s.begin(), s.end(), space));
  s.erase(std::find_if_not(s.rbegin(), s.rend(), space).base(), s.end());
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool contains(const std::vector<std::string>& list, const std::string& word) {
  return std::find(list.begin(), list.end(), word) != list.end();
}

std::string joined(const std::vector<std::string>& list) {
  std::string out;
  for (const auto& w : list) out += (out.empty() ? "" : ", ") + w;
  return out;
}

std::string expected(const Setting& s) {
  switch (s.type) {
    case Type::flag: return "one of " + joined(kTrue) + " or " + joined(kFalse);
    case Type::integer: {
      std::string out = "an integer >= " + std::to_string(s.min);
      for (const auto& [word, v] : s.names) out += ", or " + word;
      return out;
    }
    case Type::text: return "any text";
    case Type::choice: return "one of " + joined(s.words);
    case Type::words: return "a comma-separated list of " + joined(s.words);
  }
  return "";
}

[[noreturn]] void bad(const Setting& s, const char* raw) {
  throw SettingError(std::string(s.name) + "='" + raw + "': expected " + expected(s));
}

Value parse_integer(const Setting& s, const char* raw) {
  const std::string word = lower_trimmed(raw);
  for (const auto& [name, v] : s.names)
    if (word == name) return v;
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(word.c_str(), &end, 10);
  if (word.empty() || *end != '\0' || errno == ERANGE || v < s.min) bad(s, raw);
  return static_cast<int64_t>(v);
}

}  // namespace

const std::vector<Setting>& table() {
  static const std::vector<Setting> settings = make_table();
  return settings;
}

const char* type_name(Type type) {
  switch (type) {
    case Type::flag: return "flag";
    case Type::integer: return "integer";
    case Type::text: return "text";
    case Type::choice: return "choice";
    case Type::words: return "words";
  }
  return "?";
}

const Setting& find(const std::string& name) {
  for (const auto& s : table())
    if (name == s.name) return s;
  throw SettingError("no setting named " + name + " (runtime/settings.cpp lists them)");
}

Value parse(const Setting& s, const char* raw) {
  if (raw == nullptr || *raw == '\0') {
    if (s.fallback == nullptr) return std::monostate{};
    raw = s.fallback;
  }
  switch (s.type) {
    case Type::flag: {
      const std::string word = lower_trimmed(raw);
      if (contains(kTrue, word)) return true;
      if (contains(kFalse, word)) return false;
      bad(s, raw);
    }
    case Type::integer: return parse_integer(s, raw);
    case Type::text: return std::string(raw);
    case Type::choice: {
      const std::string word = lower_trimmed(raw);
      if (!contains(s.words, word)) bad(s, raw);
      return word;
    }
    case Type::words: {
      std::vector<std::string> out;
      std::stringstream items(lower_trimmed(raw));
      for (std::string item; std::getline(items, item, ',');) {
        item = lower_trimmed(item.c_str());
        if (item.empty()) continue;
        if (!contains(s.words, item)) bad(s, raw);
        out.push_back(item);
      }
      return out;
    }
  }
  bad(s, raw);
}

Value value(const std::string& name) {
  const Setting& s = find(name);
  return parse(s, std::getenv(s.name));
}

void check_all() {
  for (const auto& s : table()) parse(s, std::getenv(s.name));
}

bool flag(const std::string& name) { return std::get<bool>(value(name)); }

std::optional<int64_t> integer(const std::string& name) {
  Value v = value(name);
  if (std::holds_alternative<std::monostate>(v)) return std::nullopt;
  return std::get<int64_t>(v);
}

std::string text(const std::string& name) {
  Value v = value(name);
  if (std::holds_alternative<std::monostate>(v)) return "";
  return std::get<std::string>(v);
}

bool lists(const std::string& name, const std::string& word) {
  return contains(std::get<std::vector<std::string>>(value(name)), word);
}

}  // namespace torch_tpu::runtime::settings
