#pragma once

#include "messages/error.hpp"

#include <array>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

/// Fault injection for soaks and tests (`guestflow control-plane --faults SPEC`): which share
/// of which wire-API calls is answered wrongly, and how. A plain class, free of any HTTP
/// library: the spec, its refusals, and a decision source that is a pure function of
/// (seed, operation, call number), so one seed gives the same faults to the n-th call of an
/// operation however calls of different operations interleave.
namespace guestflow::local {

/// The operations a spec names (`any` in a spec means every one of them, `other` included).
enum class fault_op : uint8_t {
  create, ///< POST /v1/sandboxes
  exec,   ///< POST …/exec
  files,  ///< PUT and GET …/files
  remove, ///< DELETE /v1/sandboxes/{id} (`delete` in a spec)
  pause,
  resume,
  list, ///< GET /v1/sandboxes
  get,  ///< GET /v1/sandboxes/{id}
  other ///< every other endpoint (shapes, capabilities, egress, images, …): `any` only
};
inline constexpr size_t fault_op_count = 9;

/// What a faulty answer is. Ordered: a call's one draw walks the shares in this order.
enum class fault_kind : uint8_t {
  error_5xx, ///< 500 at once; the call is not carried out
  busy_429,  ///< 429 (JSend fail, code capacity) at once; not carried out
  drop,      ///< a 200 whose body stops mid-way and the connection closes; not carried out
  timeout,   ///< no answer until the client gives up (or `hold` passed); not carried out
  lost,      ///< carried out, then dropped like `drop`: the guest exists, nobody heard
};
inline constexpr size_t fault_kind_count = 5;

std::string_view to_string(fault_op op);
std::string_view to_string(fault_kind kind);

/// One call's fate: at most one fault, and a delay before anything (0: none).
struct fault_decision {
  std::optional<fault_kind> kind;
  std::chrono::milliseconds delay{0};
};

/// A parsed `--faults` spec. Grammar (comma-separated items, blanks around them ignored):
///   OP:KIND=P           OP in create, exec, files, delete, pause, resume, list, get, any;
///                       KIND in 5xx, 429, drop, timeout, lost; P a share in [0, 1]
///   OP:delay=LO-HI[@P]  delay a share P (default 1) of OP's calls by a uniform LO..HI,
///                       each `Nms` or `Ns` (HI's unit also LO's when LO has none); or `N`
///   seed=N              the decision source's seed (default 1)
///   hold=D              how long `timeout` holds a call at most (default 150s: longer than
///                       the runtime's longest control-plane deadline, 120 s)
/// An operation's own entry for a kind replaces `any`'s; its shares must add up to ≤ 1.
/// Empty, `off` or `none`: no faults.
class fault_plan {
public:
  /// Refused with bad_request, the message starting with `source` (the flag or variable)
  /// and naming the item.
  static result<fault_plan> parse(std::string_view spec, std::string_view source = "--faults");

  /// The fate of call number `n` (0-based) of `op`. Pure.
  fault_decision decide(fault_op op, uint64_t n) const;

  bool empty() const noexcept;
  uint64_t seed() const noexcept { return seed_; }
  std::chrono::milliseconds hold() const noexcept { return hold_; }
  /// The share of `op`'s calls that get `kind` (after `any` was applied).
  double share(fault_op op, fault_kind kind) const;

  /// The canonical spec (reads back to the same plan): per operation, only what applies.
  std::string to_string() const;

private:
  struct op_rules {
    std::array<std::optional<double>, fault_kind_count> share; ///< unset: `any`'s
    std::optional<double> delay_share;                         ///< unset: `any`'s
    uint32_t delay_lo_ms = 0;
    uint32_t delay_hi_ms = 0;
  };
  /// Index fault_op_count holds `any`.
  std::array<op_rules, fault_op_count + 1> rules_{};
  uint64_t seed_ = 1;
  std::chrono::milliseconds hold_{150'000};

  const op_rules& delay_rules(fault_op op) const;
};

} // namespace guestflow::local
