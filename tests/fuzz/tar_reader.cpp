// The image import's archive reader (controlplane/local/images/archive_reader: libarchive's
// filters and tar reader, plus the type-flag check on each member's header block), fed
// through a byte source that returns short reads of drawn sizes, as a pipe does.
// Properties: total (members until the end, or a bad_request naming the offset); a file
// member yields exactly its size in data, never more; no more data than the uncompressed
// stream; member count bounded by the uncompressed stream's blocks.

#include "controlplane/local/images/archive_reader.hpp"
#include "tests/fuzz/fuzz_support.hpp"
#include "tests/fuzz/tar_support.hpp"

#include <algorithm>
#include <cstring>

using namespace guestflow;
using namespace guestflow::fuzz;

namespace {

class memory_source : public local::byte_source {
public:
  memory_source(std::string_view bytes, draws& d)
      : rest_(bytes)
      , d_(d) {}
  result<size_t> read(char* buf, size_t n) override {
    FUZZ_CHECK(n > 0, "the reader asked for 0 bytes");
    size_t k = std::min({n, rest_.size(), 1 + d_.below(d_.below(2) ? 16 : 2048)});
    std::memcpy(buf, rest_.data(), k);
    rest_.remove_prefix(k);
    return k;
  }

private:
  std::string_view rest_;
  draws& d_;
};

void check(std::string_view archive, draws& d) {
  memory_source src{archive, d};
  local::archive_reader reader{src};
  uint64_t members = 0, data_total = 0;
  std::vector<char> buf(4096);
  for (;;) {
    auto m = reader.next();
    if (!m) {
      FUZZ_CHECK(m.error().code == ec::bad_request,
                 "next() failed with " + std::string{to_string(m.error().code)});
      return;
    }
    if (!*m) return;
    ++members;
    FUZZ_CHECK(members <= reader.position() / 512, "more members than header blocks");
    auto& member = **m;
    // Only files' data is read (as image_import does); the rest, and sometimes a file's
    // data too, is left for next() to skip.
    if (member.type != local::tar_member::kind::file) {
      FUZZ_CHECK(member.size == 0, "a non-file member with a size");
      continue;
    }
    if (d.below(4) == 0) continue;
    uint64_t got = 0;
    for (;;) {
      auto n = reader.read_data(buf.data(), 1 + d.below(buf.size()));
      if (!n) {
        FUZZ_CHECK(n.error().code == ec::bad_request,
                   "read_data failed with " + std::string{to_string(n.error().code)});
        return;
      }
      if (*n == 0) break;
      got += *n;
      FUZZ_CHECK(got <= member.size, "more data than the member's size");
    }
    FUZZ_CHECK(got == member.size, "a member's data ended early without an error");
    data_total += got;
    FUZZ_CHECK(data_total <= reader.position(), "more data than the uncompressed stream");
  }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto input = as_view(data, size);
  draws d{fingerprint(input)};
  check(input, d);
  auto fixed = with_checksums_fixed(input);
  if (fixed != input) check(fixed, d);
  return 0;
}
