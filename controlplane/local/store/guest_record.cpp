#include "controlplane/local/store/guest_record.hpp"

namespace guestflow::local {

sandbox_view to_view(const guest_record& r) {
  sandbox_view v;
  v.id = r.id;
  v.name = r.name;
  v.status = r.status;
  v.shape = r.shape;
  v.egress = r.egress;
  for (const auto& kv : r.envs)
    v.envs.push_back(kv.first);
  v.created_at = r.created_at;
  v.paused_at = r.paused_at;
  v.last_resumed_at = r.last_resumed_at;
  v.auto_pause_after_seconds = r.auto_pause_after_seconds;
  v.persistent = r.persistent;
  v.stopped_at = r.stopped_at;
  v.last_used_at = r.last_used_at;
  v.isolation = to_string(r.runtime.isolation);
  v.started_from = r.started_from;
  v.restore_error = r.restore_error;
  if (r.persistent) {
    v.idle_ttl_seconds = r.idle_ttl_seconds;
    v.delete_after_stop_seconds = r.delete_after_stop_seconds;
  }
  return v;
}

} // namespace guestflow::local

#include "controlplane/local/service/sandbox_service.hpp"

namespace guestflow::local {

sandbox_list list_page(const std::vector<const guest_record*>& records, const list_query& q) {
  sandbox_list out;
  for (const auto* r : records) {
    if (q.status && r->status != *q.status) continue;
    if (out.total >= q.offset && out.data.size() < q.limit) out.data.push_back(to_view(*r));
    ++out.total;
  }
  return out;
}

whoami count_guests(const std::vector<const guest_record*>& records) {
  whoami w;
  w.user_id = "local";
  for (const auto* r : records) {
    if (r->status == sandbox_status::destroyed) continue;
    ++w.total;
    if (r->status == sandbox_status::running)
      ++w.running;
    else if (r->status == sandbox_status::paused)
      ++w.paused;
    else
      ++w.other;
  }
  return w;
}

} // namespace guestflow::local
