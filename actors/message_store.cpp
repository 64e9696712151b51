#include "actors/message_store.hpp"

#include "messages/flow_run.hpp"
#include "messages/type_ids.hpp"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

namespace guestflow {
namespace {

namespace fs = std::filesystem;

bool kept_as_is(unsigned char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
         c == '_' || c == '-';
}

failure io_failure(const char* what, const fs::path& file, int err) {
  return fail(ec::unavailable, std::string{"message store: cannot "} + what + " " +
                                   file.string() + ": " + std::strerror(err));
}

/// Writes all of `bytes`: a write to a regular file may take only part.
bool write_all(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    auto n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

/// The whole file behind `fd`, from its start.
result<std::string> read_all(int fd, const fs::path& file) {
  std::string out;
  char chunk[65536];
  for (off_t at = 0;;) {
    auto n = ::pread(fd, chunk, sizeof chunk, at);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return io_failure("read", file, errno);
    if (n == 0) return out;
    out.append(chunk, static_cast<size_t>(n));
    at += n;
  }
}

/// The messages of a file's text, in order: its complete lines that are JSON objects. A
/// torn line (a crash mid-append) is no object — no prefix of one is — and is skipped.
std::vector<raw_json> messages_in(std::string_view text) {
  std::vector<raw_json> out;
  for (auto nl = text.find('\n'); nl != std::string_view::npos; nl = text.find('\n')) {
    auto line = text.substr(0, nl);
    text.remove_prefix(nl + 1);
    if (line.empty()) continue;
    auto v = parse_raw_json(line);
    if (v && type_of(*v) == json_type::object) out.push_back(std::move(*v));
  }
  return out;
}

/// Makes the directory's entries (a created or renamed file) durable.
void sync_dir(const fs::path& dir) {
  unique_fd d{::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)};
  if (d) ::fsync(d.get());
}

} // namespace

std::optional<failure> session_id_refusal(std::string_view id) {
  if (id.empty() || id.size() > max_stored_session_id_bytes)
    return fail(ec::bad_request, "session_id: the message store takes ids of 1 to " +
                                     std::to_string(max_stored_session_id_bytes) +
                                     " bytes, this one has " + std::to_string(id.size()));
  for (size_t i = 0; i < id.size(); ++i) {
    auto c = static_cast<unsigned char>(id[i]);
    if (c < 0x20 || c == 0x7f)
      return fail(ec::bad_request,
                  "session_id: a control character at byte " + std::to_string(i));
  }
  return std::nullopt;
}

message_files::message_files(fs::path dir, message_store_limits limits)
    : dir_(std::move(dir))
    , limits_(limits) {}

fs::path message_files::file_of(std::string_view session) const {
  static constexpr char hex[] = "0123456789ABCDEF";
  std::string name;
  for (auto ch : session) {
    auto c = static_cast<unsigned char>(ch);
    if (kept_as_is(c)) {
      name += ch;
    } else {
      name += '%';
      name += hex[c >> 4];
      name += hex[c & 15];
    }
  }
  return dir_ / (name + ".ndjson");
}

result<std::vector<raw_json>> message_files::load(const std::string& session) const {
  if (auto refused = session_id_refusal(session)) return *refused;
  auto file = file_of(session);
  unique_fd fd{::open(file.c_str(), O_RDONLY | O_CLOEXEC)};
  if (!fd && errno == ENOENT) return std::vector<raw_json>{};
  if (!fd) return io_failure("open", file, errno);
  // Shared: an append in progress finishes first (a reader never sees half a line).
  while (::flock(fd.get(), LOCK_SH) != 0)
    if (errno != EINTR) return io_failure("lock", file, errno);
  auto text = read_all(fd.get(), file);
  if (!text) return text.error();
  auto all = messages_in(*text);
  if (all.size() > limits_.loaded_messages)
    all.erase(all.begin(), all.end() - static_cast<std::ptrdiff_t>(limits_.loaded_messages));
  return all;
}

result<unique_fd> message_files::lock_for_append(const fs::path& file) const {
  // A trim replaces the file by rename: whoever waited for the lock on the old inode opens
  // the new one. Bounded, in case something keeps replacing it.
  for (int attempt = 0; attempt < 64; ++attempt) {
    unique_fd fd{::open(file.c_str(), O_RDWR | O_APPEND | O_CREAT | O_CLOEXEC, 0600)};
    if (!fd) return io_failure("open", file, errno);
    while (::flock(fd.get(), LOCK_EX) != 0)
      if (errno != EINTR) return io_failure("lock", file, errno);
    struct stat held {};
    struct stat now {};
    if (::fstat(fd.get(), &held) != 0) return io_failure("stat", file, errno);
    if (::stat(file.c_str(), &now) == 0 && now.st_ino == held.st_ino &&
        now.st_dev == held.st_dev)
      return fd;
  }
  return fail(ec::unavailable, "message store: " + file.string() + " kept being replaced");
}

result<bool> message_files::append(const std::string& session, const raw_json& message) {
  if (auto refused = session_id_refusal(session)) return *refused;
  if (type_of(message) != json_type::object)
    return fail(ec::bad_request, "message store: a message is a JSON object");
  if (message.text.size() > limits_.message_bytes)
    return fail(ec::capacity, "message store: a message of " +
                                  std::to_string(message.text.size()) + " bytes is over the " +
                                  std::to_string(limits_.message_bytes) + "-byte cap");
  std::error_code err;
  if (fs::create_directories(dir_, err))
    fs::permissions(dir_, fs::perms::owner_all, fs::perm_options::replace, err);
  if (err) return io_failure("create", dir_, err.value());
  auto file = file_of(session);
  auto fd = lock_for_append(file);
  if (!fd) return fd.error();
  struct stat st {};
  if (::fstat(fd->get(), &st) != 0) return io_failure("stat", file, errno);
  std::string line;
  // A torn last line (a crash mid-append) is closed off, so that it stays its own line.
  char last = '\n';
  if (st.st_size > 0 && ::pread(fd->get(), &last, 1, st.st_size - 1) != 1)
    return io_failure("read", file, errno);
  if (last != '\n') line += '\n';
  line += message.text;
  line += '\n';
  if (static_cast<size_t>(st.st_size) + line.size() > limits_.session_bytes)
    return trim(fd->get(), file, message.text);
  if (!write_all(fd->get(), line)) return io_failure("write", file, errno);
  if (::fdatasync(fd->get()) != 0) return io_failure("sync", file, errno);
  if (st.st_size == 0) sync_dir(dir_);
  return true;
}

result<bool> message_files::trim(int fd, const fs::path& file, std::string_view line) const {
  auto text = read_all(fd, file);
  if (!text) return text.error();
  auto kept = messages_in(*text);
  auto room = limits_.session_bytes / 2;
  size_t used = line.size() + 1;
  auto first = kept.size();
  while (first > 0 && used + kept[first - 1].text.size() + 1 <= room)
    used += kept[--first].text.size() + 1;
  std::string out;
  out.reserve(used);
  for (auto i = first; i < kept.size(); ++i) {
    out += kept[i].text;
    out += '\n';
  }
  out += line;
  out += '\n';
  // A copy, synced, then renamed over the file: a crash leaves the old file or the new one.
  auto tmp = dir_ / ("." + file.filename().string() + "." + std::to_string(::getpid()));
  unique_fd t{::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600)};
  if (!t) return io_failure("create", tmp, errno);
  if (!write_all(t.get(), out) || ::fsync(t.get()) != 0) {
    auto why = errno;
    ::unlink(tmp.c_str());
    return io_failure("write", tmp, why);
  }
  if (::rename(tmp.c_str(), file.c_str()) != 0) {
    auto why = errno;
    ::unlink(tmp.c_str());
    return io_failure("replace", file, why);
  }
  sync_dir(dir_);
  spdlog::debug("message store: {} trimmed to its newest {} messages", file.string(),
                kept.size() - first + 1);
  return true;
}

message_store_actor::behavior_type
message_store(message_store_actor::stateful_pointer<message_store_state> self, fs::path dir,
              message_store_limits limits) {
  self->state.files.emplace(std::move(dir), limits);
  return {
      [self](get_atom, run_request& req) -> caf::result<run_request> {
        if (!req.session_id || req.history) return std::move(req);
        auto history = self->state.files->load(*req.session_id);
        if (!history) return make_error(history.error().code, history.error().message);
        req.history = std::move(*history);
        return std::move(req);
      },
      [self](put_atom, const std::string& session, const raw_json& message) {
        auto stored = self->state.files->append(session, message);
        if (!stored)
          spdlog::warn("message store: a message of session '{}' was not stored: {}", session,
                       stored.error().message);
      },
      [](drain_atom) { return true; },
  };
}

} // namespace guestflow
