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

/// TCP hash buckets of each namespace a fork template's clones get (child_tcp_hash).
constexpr unsigned guest_tcp_hash_buckets = 4096;

/// Network namespaces made from inside `netns_fd` get a TCP hash table of their own with
/// `buckets` entries (net.ipv4.tcp_child_ehash_entries there). One that shares the host's
/// table (262,144 buckets on the bench host) has its teardown walk all of it for TIME_WAIT
/// sockets (inet_twsk_purge, a kworker's ~0.2 ms a namespace: bench/README.md); its own,
/// only its own few. Such a namespace keeps at most buckets / 2 TIME_WAIT sockets. Same
/// thread rules as socket_in_netns.
result<bool> set_child_tcp_hash(int netns_fd, unsigned buckets);

} // namespace guestflow::local
