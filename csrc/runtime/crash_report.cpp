#include "runtime/crash_report.h"

#include <execinfo.h>
#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <exception>

namespace torch_tpu::runtime {
namespace {

std::terminate_handler previous = nullptr;
std::atomic<bool> reported{false};

void write_all(const char* text) {
  size_t left = std::strlen(text);
  while (left > 0) {
    ssize_t n = ::write(STDERR_FILENO, text, left);
    if (n <= 0) return;
    text += n;
    left -= static_cast<size_t>(n);
  }
}

[[noreturn]] void report_then_terminate() {
  // One report per process: a second thread terminating at the same time only aborts.
  if (!reported.exchange(true)) {
    char name[32] = "?";
    pthread_getname_np(pthread_self(), name, sizeof(name));
    char line[128];
    std::snprintf(line, sizeof(line), "torch_tpu: std::terminate on thread %ld (%s); its stack:\n",
                  static_cast<long>(::gettid()), name);
    write_all(line);
    void* frames[64];
    int depth = ::backtrace(frames, 64);
    ::backtrace_symbols_fd(frames, depth, STDERR_FILENO);
  }
  if (previous != nullptr) previous();
  std::abort();
}

}  // namespace

void install_crash_report() {
  static const bool installed = [] {
    previous = std::set_terminate(report_then_terminate);
    return true;
  }();
  (void)installed;
}

}  // namespace torch_tpu::runtime
