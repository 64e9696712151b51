#include "actors/output_relay.hpp"

#include <cerrno>
#include <unistd.h>

namespace guestflow {
namespace {

/// All of `text` to `fd`; false when the descriptor no longer takes it.
bool write_all(int fd, std::string_view text) {
  while (!text.empty()) {
    auto n = ::write(fd, text.data(), text.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    text.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

} // namespace

output_relay_actor::behavior_type
output_relay(output_relay_actor::stateful_pointer<output_relay_state> self, int out_fd,
             int err_fd) {
  self->state.out_fd = out_fd;
  self->state.err_fd = err_fd;
  return {
      [self](exec_stream_line& line) {
        auto& st = self->state;
        using k = exec_stream_line::kind;
        if (st.broken) return;
        if (line.type == k::stdout_chunk)
          st.broken = !write_all(st.out_fd, line.text);
        else if (line.type == k::stderr_chunk)
          st.broken = !write_all(st.err_fd, line.text);
        else if (line.type == k::error) // the control plane's word on the stream (a cap hit)
          st.broken = !write_all(st.err_fd, "guestflow: control plane: " + line.text + "\n");
      },
      [](drain_atom) { return true; },
  };
}

} // namespace guestflow
