// Every TORCH_TPU_* environment variable, named once with its type, default and what it
// does. C++ reads them through the typed helpers below and Python through the same table
// and parser (torch_tpu/_settings.py, via _C), so "1", "true" and "on" mean the same
// everywhere and a bad value raises SettingError naming the variable and what it
// accepts. An unset or empty variable takes its default. README.md's table of variables
// is generated from this one (tools/settings_readme.py).
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace torch_tpu::runtime::settings {

enum class Type {
  flag,     // 1/true/yes/on or 0/false/no/off
  integer,  // a whole number >= min, or one of `names`
  text,     // any text (a path)
  choice,   // one of `words`
  words,    // a comma-separated list of `words`
};

struct Setting {
  const char* name;
  Type type;
  const char* fallback;  // the default as the variable would spell it; nullptr: none here
  const char* doc;       // one line: what it does (README's "effect" column)
  std::vector<std::string> words = {};                      // choice, words
  int64_t min = 0;                                          // integer
  std::vector<std::pair<std::string, int64_t>> names = {};  // integer: named values
};

// A bad value, or a name the table lacks. std::invalid_argument: Python sees ValueError.
class SettingError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

const std::vector<Setting>& table();
const char* type_name(Type type);  // "flag", "integer", ...
const Setting& find(const std::string& name);

// A variable's value: none (unset, no default), flag, integer, text/choice, words.
using Value = std::variant<std::monostate, bool, int64_t, std::string, std::vector<std::string>>;

// `raw` as `setting` reads it (nullptr or empty: the default).
Value parse(const Setting& setting, const char* raw);
// The variable's current value in the environment.
Value value(const std::string& name);

// Parses every variable: throws SettingError for the first bad one. The runtime calls it
// when it starts, so a bad value fails the start whichever variable is read first.
void check_all();

bool flag(const std::string& name);
std::optional<int64_t> integer(const std::string& name);
std::string text(const std::string& name);  // "" when unset without a default
bool lists(const std::string& name, const std::string& word);

}  // namespace torch_tpu::runtime::settings
