#pragma once

#include "messages/error.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

/// Value types of the component surface (Langflow's CreateOS Sandbox component): a
/// reusable guest handed out by the registry, and the files a run hands back.
namespace guestflow {

/// A reusable guest as the registry hands it to one run: running, egress verified, and
/// held by that run until it releases the name.
struct reusable_guest {
  std::string id;
  std::string name;     ///< gf-c-<hash> (names::reusable)
  bool created = false; ///< this acquire created it (else it was adopted)
  bool resumed = false; ///< it was paused (or pausing/resuming) and was brought back
  friend bool operator==(const reusable_guest& a, const reusable_guest& b) {
    return a.id == b.id && a.name == b.name && a.created == b.created && a.resumed == b.resumed;
  }
};

template<class Inspector>
typename Inspector::result_type inspect(Inspector& f, reusable_guest& x) {
  return f(x.id, x.name, x.created, x.resumed);
}

/// One returned file: `path` is relative to /workspace/artifacts, byte-exact from the
/// archive (a trailing space, a newline or UTF-8 survive), `bytes.size() == size`.
struct returned_file {
  std::string path;
  uint64_t size = 0;
  std::string bytes;
  friend bool operator==(const returned_file& a, const returned_file& b) {
    return a.path == b.path && a.size == b.size && a.bytes == b.bytes;
  }
};

template<class Inspector>
typename Inspector::result_type inspect(Inspector& f, returned_file& x) {
  return f(x.path, x.size, x.bytes);
}

/// An archive member that was not returned, and why ("escapes the directory",
/// "symbolic link", "hard link", "device", "fifo", …).
struct dropped_member {
  std::string path;
  std::string reason;
  friend bool operator==(const dropped_member& a, const dropped_member& b) {
    return a.path == b.path && a.reason == b.reason;
  }
};

template<class Inspector>
typename Inspector::result_type inspect(Inspector& f, dropped_member& x) {
  return f(x.path, x.reason);
}

/// What came back from /workspace/artifacts. `error` is set when nothing could be
/// returned (artifact_too_large past the cap, a malformed archive, tar failing in the
/// guest); the run's own results stay valid either way.
struct returned_files {
  std::vector<returned_file> files;
  std::vector<dropped_member> dropped;
  std::optional<failure> error;
  friend bool operator==(const returned_files& a, const returned_files& b) {
    return a.files == b.files && a.dropped == b.dropped && a.error == b.error;
  }
};

template<class Inspector>
typename Inspector::result_type inspect(Inspector& f, returned_files& x) {
  return f(x.files, x.dropped, x.error);
}

} // namespace guestflow
