// XLA compile options for the programs compiled now, besides the runtime's own:
// torch.tpu.compiler.custom_compiler_options blocks (per thread, nested blocks merged,
// the inner one winning) over process-wide settings (torch.tpu.allow_excess_precision).
// They are part of every program's key: the cache adds `id` to the key and `text` to the
// program's fingerprint, so a program compiled with other options is never reused.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "pjrt/compile_options.h"

namespace torch_tpu::runtime {

struct CompileOverrides {
  std::vector<pjrt::OptionOverride> options;  // sorted by name
  std::string text;                           // "name=value; ..." ("" when none)
  int64_t id = 0;                             // hash of text; 0 when none
};

// What applies on this thread now (cheap: cached until a setting changes).
const CompileOverrides& current_overrides();

void push_overrides(std::vector<pjrt::OptionOverride> options);
void pop_overrides();
// A process-wide option (a block's own setting of the same name wins); `set` false
// removes it.
void set_global_override(pjrt::OptionOverride option, bool set = true);

}  // namespace torch_tpu::runtime
