#pragma once

#include <caf/detail/stringification_inspector.hpp>
#include <cstddef>
#include <map>
#include <ostream>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace guestflow {

struct raw_json;

/// Compares an offered secret (API key, bearer token) with the configured one in time
/// independent of where they differ (no early exit), so response timing leaks nothing.
bool same_secret(std::string_view offered, std::string_view expected) noexcept;

/// What a secret's value is replaced with wherever it would be printed.
inline constexpr std::string_view redacted_value = "********";

/// A run's variables (Langflow's `load_from_db` values, API keys): NAME → value. The values
/// leave this type only through `reveal()`, for the two places that need the bytes (the
/// guest bundle's variables.json and the run's scrubber). Every printed form shows the
/// names with each value as "********": `to_string` (what CAF's logging and
/// `deep_to_string` use), `operator<<` (GoogleTest, spdlog's ostream support) and the
/// request encoders. Only CAF's serializers see the values (a run request crossing a
/// middleman must carry them).
class secret_vars {
public:
  using map_type = std::map<std::string, std::string>;

  secret_vars() = default;
  explicit secret_vars(map_type values)
      : values_(std::move(values)) {}

  bool empty() const noexcept { return values_.empty(); }
  size_t size() const noexcept { return values_.size(); }
  bool contains(const std::string& name) const { return values_.count(name) != 0; }
  void set(std::string name, std::string value) { values_[std::move(name)] = std::move(value); }
  std::vector<std::string> names() const;

  /// The values themselves: only for the bundle that ships them and the scrubber.
  const map_type& reveal() const noexcept { return values_; }

  /// The same names, every value "********".
  map_type redacted() const;

  friend bool operator==(const secret_vars& a, const secret_vars& b) {
    return a.values_ == b.values_;
  }
  friend bool operator!=(const secret_vars& a, const secret_vars& b) { return !(a == b); }

  template<class Inspector>
  friend typename Inspector::result_type inspect(Inspector& f, secret_vars& x) {
    if constexpr (std::is_same<Inspector, caf::detail::stringification_inspector>::value) {
      auto shown = x.redacted();
      return f(shown);
    } else {
      return f(x.values_);
    }
  }

private:
  map_type values_;
};

/// `{"NAME":"********",…}`.
std::string to_string(const secret_vars& x);
std::ostream& operator<<(std::ostream& os, const secret_vars& x);

/// The shortest value a scrubber looks for: shorter ones ("1", "yes") would blank ordinary
/// text everywhere and hide nothing.
inline constexpr size_t min_scrubbed_bytes = 4;

/// Replaces every occurrence of a run's secret values (those of at least
/// `min_scrubbed_bytes`) in text that leaves the host process: events, logs, error texts.
/// Overlapping and adjacent matches become one "********". An empty scrubber (a run without
/// variables) does nothing and costs one branch. Each needle is one `memmem` pass (glibc's
/// two-way search: linear, and in strides for long needles), so a run's handful of secrets
/// costs a handful of fast scans of each text and no allocation unless one is found.
class secret_scrubber {
public:
  secret_scrubber() = default;
  explicit secret_scrubber(const secret_vars& vars);

  bool empty() const noexcept { return needles_.empty(); }

  /// True if `text` holds a secret.
  bool found_in(std::string_view text) const;

  /// `text` with each secret replaced; false (and `text` untouched) when there is none.
  bool scrub(std::string& text) const;

  /// The length of the longest end of `text` that begins a secret without completing it
  /// (0 when none does): what a stream of chunks must hold back until its next chunk, so
  /// that a secret split across two chunks is still found whole.
  size_t unfinished_tail(std::string_view text) const;

  /// `x` (canonical JSON) with each secret replaced inside its strings, keys included, and
  /// any number or literal that holds one written as the string "********": the value stays
  /// valid JSON. False (and `x` untouched) when there is none. A value is looked for as it
  /// appears inside a JSON string (escaped as the codecs escape it), so that text without a
  /// secret is only scanned, never parsed.
  bool scrub_json(raw_json& x) const;

private:
  /// [begin, end) of every match in `text`, sorted and merged.
  std::vector<std::pair<size_t, size_t>> matches(std::string_view text) const;

  std::vector<std::string> needles_; ///< distinct, longest first
  /// The values whose form inside a JSON string differs (a quote, a backslash, a control
  /// character), in that form.
  std::vector<std::string> json_needles_;
};

} // namespace guestflow
