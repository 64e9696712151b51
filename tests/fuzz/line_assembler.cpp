// The NDJSON assembler: common/line_assembler (every byte stream cut into lines: guest
// stdout, NDJSON bodies) and the control plane client's ndjson_reader over it. The input is
// the stream; a cap and a chunking are drawn from it. Both are checked against a model that
// splits the whole stream at once: same lines, same overflow decision, and never more than
// the cap + 1 bytes buffered.

#include "common/line_assembler.hpp"

#include "controlplane/client/ndjson_reader.hpp"
#include "tests/fuzz/fuzz_support.hpp"

#include <cstdio>
#include <string>
#include <vector>

using namespace guestflow;
using namespace guestflow::fuzz;

namespace {

struct outcome {
  std::vector<std::string> lines;
  bool ok = true;
  bool operator==(const outcome& o) const { return lines == o.lines && ok == o.ok; }
};

std::string_view strip_cr(std::string_view s) {
  return !s.empty() && s.back() == '\r' ? s.substr(0, s.size() - 1) : s;
}

/// What the documentation promises, computed on the whole stream.
outcome model(std::string_view s, size_t max_line, bool skip_blank) {
  outcome out;
  while (!s.empty()) {
    auto nl = s.find('\n');
    auto line = strip_cr(s.substr(0, nl));
    if (line.size() > max_line) {
      out.ok = false;
      return out;
    }
    if (!(skip_blank && line.empty())) out.lines.emplace_back(line);
    if (nl == std::string_view::npos) break;
    s.remove_prefix(nl + 1);
  }
  return out;
}

std::string show(const outcome& o) {
  std::string s = o.ok ? "ok" : "overflow";
  for (auto& l : o.lines) {
    s += " [";
    for (unsigned char c : l) {
      if (c >= 0x20 && c < 0x7f) {
        s += static_cast<char>(c);
      } else {
        char hex[8];
        std::snprintf(hex, sizeof hex, "\\x%02x", c);
        s += hex;
      }
    }
    s += "]";
  }
  return s;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto input = as_view(data, size);
  draws d{fingerprint(input)};
  size_t max_line = d.below(3) == 0 ? size_t{1} << 20 : d.below(64);
  auto pieces = chunks(input, d);

  {
    line_assembler a{max_line};
    outcome got;
    auto collect = [&](std::string_view l) { got.lines.emplace_back(l); };
    for (auto p : pieces) {
      bool fed = a.feed(p, collect);
      FUZZ_CHECK(fed == !a.overflowed(), "feed's answer disagrees with overflowed()");
      FUZZ_CHECK(a.pending() <= max_line + 1, "buffered past the cap + 1");
    }
    got.ok = a.finish(collect);
    FUZZ_CHECK(a.finish(collect) == got.ok, "a second finish answers differently");
    auto want = model(input, max_line, false);
    FUZZ_CHECK(got == want, "line_assembler (cap " + std::to_string(max_line) + "): got " +
                                show(got) + ", want " + show(want));
  }
  {
    cp::ndjson_reader r{max_line};
    outcome got;
    cp::ndjson_reader::line_fn collect = [&](std::string_view l) {
      FUZZ_CHECK(!l.empty(), "ndjson_reader delivered a blank line");
      got.lines.emplace_back(l);
    };
    for (auto p : pieces) {
      r.feed(p, collect);
      FUZZ_CHECK(r.buffered() <= max_line + 1, "ndjson_reader buffered past the cap + 1");
    }
    got.ok = r.finish(collect);
    FUZZ_CHECK(got.ok == !r.failed(), "finish's answer disagrees with failed()");
    auto want = model(input, max_line, true);
    FUZZ_CHECK(got == want, "ndjson_reader (cap " + std::to_string(max_line) + "): got " +
                                show(got) + ", want " + show(want));
  }
  return 0;
}
