// The tar reader of returned files (actors/artifact_archive: the guest's /workspace/artifacts
// archive, unpacked in memory). Properties: total (a value or a guest_failed saying where);
// within its limits; every returned path is one write_under would accept (relative, no "..",
// no NUL), unique, and its bytes lie inside the archive.

#include "actors/artifact_archive.hpp"

#include "tests/fuzz/fuzz_support.hpp"
#include "tests/fuzz/tar_support.hpp"

#include <set>

using namespace guestflow;
using namespace guestflow::fuzz;

namespace {

void check(std::string_view archive, const artifacts::archive_limits& limits) {
  auto r = artifacts::unpack(archive, limits);
  if (!r) {
    FUZZ_CHECK(r.error().code == ec::guest_failed,
               "unpack failed with " + std::string{to_string(r.error().code)});
    FUZZ_CHECK(!r.error().message.empty(), "unpack failed without a message");
    return;
  }
  FUZZ_CHECK(r->files.size() + r->dropped.size() <= limits.max_members,
             "more rows than the member limit");
  std::set<std::string> seen;
  uint64_t total = 0;
  for (auto& f : r->files) {
    FUZZ_CHECK(artifacts::unsafe_path_reason(f.path).empty(),
               "unpack returned an unsafe path: " + f.path);
    FUZZ_CHECK(f.path.compare(0, 2, "./") != 0, "a leading ./ survived: " + f.path);
    FUZZ_CHECK(seen.insert(f.path).second, "a path returned twice: " + f.path);
    FUZZ_CHECK(f.size == f.bytes.size(), "size disagrees with the bytes of " + f.path);
    total += f.bytes.size();
  }
  FUZZ_CHECK(total <= archive.size(), "more file bytes than archive bytes");
  for (auto& d : r->dropped)
    FUZZ_CHECK(!d.reason.empty(), "a member dropped without a reason: " + d.path);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto input = as_view(data, size);
  draws d{fingerprint(input)};
  artifacts::archive_limits limits;
  if (d.below(2) == 0) {
    limits.max_members = 1 + d.below(8);
    limits.max_meta_bytes = d.below(1024);
  }
  check(input, limits);
  auto fixed = with_checksums_fixed(input);
  if (fixed != input) check(fixed, limits);
  (void)artifacts::unsafe_path_reason(input);
  return 0;
}
