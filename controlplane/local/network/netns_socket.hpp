#pragma once

#include "common/unique_fd.hpp"
#include "messages/error.hpp"

#include <string>

/// Sockets made inside a guest's network namespace: a service URL connects to the guest's
/// own loopback from there, so no proxied byte can reach a port of the host (or of another
/// guest) whatever address the request names.
namespace guestflow::local {

/// A TCP socket (IPv4, non-blocking, close-on-exec) belonging to the network namespace
/// `netns_fd` (an open /proc/<pid>/ns/net): the calling thread enters it, creates the
/// socket and returns to the process's own namespace. A socket keeps the namespace it was
/// made in, so the caller connects it from any thread. Call from a worker thread: the
/// thread is in the guest's namespace in between (a thread that cannot return aborts the
/// process rather than serve the host's work from there).
result<unique_fd> socket_in_netns(int netns_fd);

/// Opens /proc/<pid>/ns/net.
result<unique_fd> open_netns_of(int pid);

} // namespace guestflow::local
