#include "runtime/compile_log.h"

#include <cstdio>

#include "runtime/settings.h"

namespace torch_tpu::runtime {

namespace {

// Long signatures (a graph's hundred parameters) keep their head: enough to tell them apart.
constexpr size_t kMaxArgs = 8;

// "tensor<3x4xf32>" -> "f32[3,4]"; an encoding after the element type (bounds) is dropped.
std::string short_type(const std::string& body) {
  std::string type = body.substr(0, body.find(','));
  // The element type follows the last 'x' that ends a dimension ("?x", "3x").
  std::vector<std::string> dims;
  size_t start = 0, last = 0;
  for (size_t i = 0; i < type.size(); ++i) {
    if (type[i] != 'x' || i == 0) continue;
    char prev = type[i - 1];
    if (prev != '?' && (prev < '0' || prev > '9')) continue;
    dims.push_back(type.substr(start, i - start));
    start = i + 1;
    last = i;
  }
  std::string element = dims.empty() ? type : type.substr(last + 1);
  std::string out = element + "[";
  for (size_t i = 0; i < dims.size(); ++i) out += (i ? "," : "") + dims[i];
  return out + "]";
}

// "f32[3,4], i64[]" -> "f32, i64"
std::string dtypes_of(const std::string& signature) {
  std::string out;
  bool inside = false;
  for (char c : signature) {
    if (c == '[') inside = true;
    if (!inside) out += c;
    if (c == ']') inside = false;
  }
  return out;
}

}  // namespace

const char* disk_outcome_name(DiskOutcome outcome) {
  switch (outcome) {
    case DiskOutcome::off: return "off";
    case DiskOutcome::hit: return "hit";
    case DiskOutcome::miss: return "miss";
    case DiskOutcome::bad_entry: return "corrupt entry";
  }
  return "?";
}

CompileLog::CompileLog() {
  print_ = settings::lists("TORCH_TPU_LOG", "compiles");
  if (settings::flag("TORCH_TPU_NO_COMPILE")) forbid_depth_ = 1;
}

CompileLog& CompileLog::get() {
  static CompileLog instance;
  return instance;
}

namespace {

std::string join(const std::vector<std::string>& args) {
  std::string out;
  for (size_t i = 0; i < args.size() && i < kMaxArgs; ++i) out += (i ? ", " : "") + args[i];
  if (args.size() > kMaxArgs) out += ", ... (" + std::to_string(args.size()) + " arguments)";
  return out;
}

}  // namespace

std::string CompileLog::signature(const std::vector<hlo::TensorType>& types) {
  std::vector<std::string> args;
  for (const hlo::TensorType& t : types) {
    std::string s = std::string(hlo::mlir_name(t.dtype)) + "[";
    for (size_t i = 0; i < t.shape.size(); ++i) s += (i ? "," : "") + std::to_string(t.shape[i]);
    args.push_back(s + "]");
  }
  return join(args);
}

std::string CompileLog::signature(const std::string& mlir) {
  size_t pos = mlir.find("@main(");
  if (pos == std::string::npos) return "";
  size_t end = mlir.find(") ->", pos);
  std::vector<std::string> args;
  const std::string open = "tensor<";
  for (size_t at = mlir.find(open, pos); at != std::string::npos && at < end;
       at = mlir.find(open, at)) {
    size_t body = at + open.size(), i = body;
    for (int depth = 1; i < mlir.size() && depth > 0; ++i)
      depth += mlir[i] == '<' ? 1 : mlir[i] == '>' ? -1 : 0;
    args.push_back(short_type(mlir.substr(body, i - 1 - body)));
    at = i;
  }
  return join(args);
}

std::string CompileLog::reason(const std::string& what, const std::string& signature,
                               bool evicted) {
  if (evicted) return "evicted";
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = seen_.find(what);
  if (it == seen_.end()) return "new program";
  if (it->second.signatures.count(signature)) return "new attributes";
  if (it->second.dtypes.count(dtypes_of(signature)))
    return what.find(", bucketed)") != std::string::npos ? "new bucket" : "new shape";
  return "new dtype";
}

void CompileLog::add(CompileRecord record) {
  if (print_) {
    const bool loaded = record.from_disk();
    std::fprintf(stderr, "torch_tpu: %s %s (%s): %s%s%s%s, %.1f ms\n",
                 loaded ? "loaded" : "compiled", record.what.c_str(), record.signature.c_str(),
                 record.reason.c_str(),
                 loaded                            ? ", from disk"
                 : record.disk == DiskOutcome::off ? ""
                                                   : ", disk ",
                 loaded || record.disk == DiskOutcome::off ? "" : disk_outcome_name(record.disk),
                 record.first_tier ? ", first tier" : "", record.seconds * 1e3);
  }
  std::lock_guard<std::mutex> lock(mutex_);
  Seen& seen = seen_[record.what];
  seen.signatures.insert(record.signature);
  seen.dtypes.insert(dtypes_of(record.signature));
  records_.push_back(std::move(record));
  while (records_.size() > kMaxRecords) records_.pop_front();
}

std::vector<CompileRecord> CompileLog::records() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return {records_.begin(), records_.end()};
}

void CompileLog::clear() {
  std::lock_guard<std::mutex> lock(mutex_);
  records_.clear();
}

void CompileLog::check_allowed(const std::string& what, const std::string& signature,
                               const std::string& reason, DiskOutcome disk) const {
  if (forbid_depth() <= 0) return;
  std::string where =
      disk == DiskOutcome::off ? "" : std::string(", disk ") + disk_outcome_name(disk);
  throw CompileForbidden("torch_tpu: " + what + " (" + signature + ") needs an XLA compile (" +
                         reason + where +
                         ") where compiles are forbidden (torch_tpu.no_compile() or "
                         "TORCH_TPU_NO_COMPILE=1)");
}

}  // namespace torch_tpu::runtime
