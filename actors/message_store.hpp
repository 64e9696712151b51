#pragma once

#include "actors/actors.hpp"
#include "common/unique_fd.hpp"
#include "messages/error.hpp"
#include "messages/json.hpp"

#include <caf/stateful_actor.hpp>
#include <cstddef>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace guestflow {

/// What one session keeps. A session past `session_bytes` drops its oldest messages down
/// to half of it (a chat history that grows forever would grow every run's spec with it).
struct message_store_limits {
  size_t message_bytes = size_t{1} << 20; ///< one message, encoded; more is refused
  size_t session_bytes = size_t{4} << 20; ///< one session's file
  size_t loaded_messages = 10'000;        ///< the newest ones a run gets as its history
};

/// The longest session id the store takes: its file name (every byte escaped) stays
/// within NAME_MAX.
inline constexpr size_t max_stored_session_id_bytes = 80;

/// Why the store cannot keep session `id` (1–80 bytes without control characters), or
/// nullopt when it can. The error names the id's length, never needs its bytes.
std::optional<failure> session_id_refusal(std::string_view id);

/// The Langflow messages of each session, oldest first, without Langflow: what `serve`
/// and the CLI keep in the state dir for runs that name a `session_id` and bring no
/// history. One append-only NDJSON file per session under `dir` (0700; files 0600), named
/// by the session id with every byte outside [A-Za-z0-9_-] written as %XX, so an id is
/// never a path. Crash-safe: a line is written whole under an exclusive flock and synced
/// before append returns; a torn last line (a crash mid-write) is skipped on load and
/// closed off by the next append; the trimming of a full session is a rename of a synced
/// copy. Several processes may share `dir` (serve and CLI runs on one state dir).
/// Blocking file I/O: the actor below calls it from its own thread.
class message_files {
public:
  explicit message_files(std::filesystem::path dir, message_store_limits limits = {});

  /// The session's messages, oldest first (the newest `loaded_messages`); none when the
  /// session has no file yet. bad_request for an id the store does not take.
  result<std::vector<raw_json>> load(const std::string& session) const;

  /// Appends `message` (a JSON object). bad_request for a bad id or a non-object,
  /// capacity for a message over `message_bytes`, unavailable when the file system fails.
  result<bool> append(const std::string& session, const raw_json& message);

  /// The file of a session (escaped as above); the id must have passed the check.
  std::filesystem::path file_of(std::string_view session) const;

private:
  /// The file opened for appending with an exclusive lock on the inode that is the
  /// session's file now (a trim may have replaced the one opened first).
  result<unique_fd> lock_for_append(const std::filesystem::path& file) const;
  /// Rewrites the locked file `fd` with its newest messages and `line` so that the whole
  /// stays within half of session_bytes.
  result<bool> trim(int fd, const std::filesystem::path& file, std::string_view line) const;

  std::filesystem::path dir_;
  message_store_limits limits_;
};

struct message_store_state {
  static inline const char* name = "message_store";
  std::optional<message_files> files;
};

/// The message store's actor (see actors.hpp). Spawn it detached: every handler does
/// blocking file I/O (flock waits on another process, fdatasync), which must never hold a
/// scheduler worker. A failed append is logged (session id and reason, never the text)
/// and the run goes on: the run's own events are the record the caller sees.
message_store_actor::behavior_type
message_store(message_store_actor::stateful_pointer<message_store_state> self,
              std::filesystem::path dir, message_store_limits limits);

} // namespace guestflow
