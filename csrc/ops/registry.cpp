#include "ops/registry.h"

#include <map>
#include <mutex>
#include <stdexcept>

namespace torch_tpu::ops {

namespace {

struct Table {
  std::mutex mutex;
  std::map<std::string, OpDef, std::less<>> ops;
};

Table& table() {
  static Table* t = new Table;  // never destroyed: lookups may run during exit
  return *t;
}

[[noreturn]] void bad(size_t i, const char* what) {
  throw std::invalid_argument("lowering: argument " + std::to_string(i) + " is not " + what);
}

template <typename T>
const T& get(const std::vector<Operand>& args, size_t i, const char* what) {
  const T* p = std::get_if<T>(&args.at(i).attr);
  if (!p) bad(i, what);
  return *p;
}

}  // namespace

const hlo::Value& Node::in(size_t i) const {
  const auto& v = args.at(i).value;
  if (!v) bad(i, "a present tensor");
  return *v;
}

bool Node::has(size_t i) const { return i < args.size() && args[i].value.has_value(); }

const std::vector<std::optional<hlo::Value>>& Node::list(size_t i) const {
  return args.at(i).values;
}

bool Node::is_none(size_t i) const {
  const Operand& a = args.at(i);
  return !a.value && a.values.empty() && std::holds_alternative<std::monostate>(a.attr);
}

int64_t Node::i64(size_t i) const {
  if (const bool* b = std::get_if<bool>(&args.at(i).attr)) return *b;
  return get<int64_t>(args, i, "an int");
}

double Node::f64(size_t i) const {
  if (const int64_t* v = std::get_if<int64_t>(&args.at(i).attr)) return static_cast<double>(*v);
  return get<double>(args, i, "a float");
}

bool Node::flag(size_t i) const { return get<bool>(args, i, "a bool"); }

const std::string& Node::str(size_t i) const { return get<std::string>(args, i, "a string"); }

const std::vector<int64_t>& Node::ints(size_t i) const {
  return get<std::vector<int64_t>>(args, i, "an int list");
}

std::optional<int64_t> Node::opt_i64(size_t i) const {
  if (std::holds_alternative<std::monostate>(args.at(i).attr)) return std::nullopt;
  return i64(i);
}

void register_lowering(std::initializer_list<const char*> names, LowerFn fn, bool random,
                       bool graph_only, Promote promote) {
  Table& t = table();
  std::lock_guard<std::mutex> lock(t.mutex);
  for (const char* name : names) {
    if (!t.ops.emplace(name, OpDef{fn, random, graph_only, promote}).second)
      throw std::logic_error(std::string("lowering registered twice: ") + name);
  }
}

const OpDef* find_lowering(std::string_view name) {
  Table& t = table();
  std::lock_guard<std::mutex> lock(t.mutex);
  auto it = t.ops.find(name);
  return it == t.ops.end() ? nullptr : &it->second;
}

std::vector<std::string> lowering_names() {
  Table& t = table();
  std::lock_guard<std::mutex> lock(t.mutex);
  std::vector<std::string> names;
  for (const auto& [name, def] : t.ops) names.push_back(name);
  return names;
}

}  // namespace torch_tpu::ops
