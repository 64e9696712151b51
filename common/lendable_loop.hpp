#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>

namespace guestflow {

/// An event loop (the control-plane client's I/O lane) that its own thread runs until a
/// scheduler borrows it; from then on the scheduler's idle worker runs it instead of
/// sleeping. An answer the loop hands to an actor is then taken on the thread that runs
/// the actor, and a call an actor starts is sent from it: no wake-up of another thread per
/// hand-off, each of which costs an inter-processor interrupt when the thread sleeps on
/// the other CPU (bench/README.md, "Hand-offs across CPUs"). One thread runs the loop at a
/// time; handing it over orders everything before with everything after (a mutex).
///
/// The owner keeps its thread: it runs the loop before any scheduler borrows it (a client
/// used before the actor system exists), after the scheduler gives it back (the system
/// ended), and for the owner's shutdown, which takes the loop back first (`reclaim`).
class lendable_loop {
public:
  virtual ~lendable_loop() = default;

  // -- the loop itself (its owner implements these) ----------------------------------------

  /// Runs one ready handler, blocking until there is one or until wake(); false once the
  /// loop has nothing left to run (stopped).
  virtual bool run_one() = 0;

  /// Runs the handlers that are ready, without blocking.
  virtual void poll() = 0;

  /// Makes a blocked run_one return soon. Any thread, while the owner is alive: others
  /// call `nudge`, which never reaches a reclaimed loop.
  virtual void wake() = 0;

  // -- the owner's thread -----------------------------------------------------------------

  /// Called by the owner's thread before each run_one: hands the loop to a waiting borrower
  /// and blocks while it is borrowed.
  void owner_turn();

  /// Takes the loop back for good (the owner is shutting down) and unlists it: waits until
  /// no borrower runs it, unless called from inside the borrowed loop itself (a handler
  /// that shuts the owner down), in which case the borrower hands it back on leaving.
  void reclaim();

  // -- a borrower (a scheduler) -----------------------------------------------------------

  /// Lists the loop for borrowers (the owner calls it once its thread runs).
  static void lend(const std::shared_ptr<lendable_loop>& loop);

  /// Whether a listed loop is free to borrow (cheap: a borrower's idle path asks it).
  static bool any_to_borrow() noexcept;

  /// A listed loop, now borrowed (its owner's thread stepped aside), or nullptr.
  static std::shared_ptr<lendable_loop> borrow();

  /// Before running the loop: false once the owner reclaimed it (drop it then).
  bool enter();

  /// After running it; hands it back if the owner reclaimed it meanwhile.
  void leave();

  /// The borrower ends (its workers are gone): the owner's thread runs the loop again.
  void give_back();

  /// wake(), unless the owner reclaimed the loop (its owner may be gone then). Any thread.
  void nudge();

  /// Whether the calling thread is running this loop as a borrower right now.
  bool borrowed_here() const;

  /// Whether a borrower has the loop (its owner's thread stepped aside).
  bool borrowed() const;

private:
  enum class state : uint8_t { owned, claimed, borrowed };

  mutable std::mutex mtx_;
  std::condition_variable cv_;
  state state_ = state::owned;
  bool inside_ = false;    ///< a borrower's thread is in run_one/poll
  bool reclaimed_ = false; ///< the owner wants it back (for good)
  const void* inside_thread_ = nullptr;
};

} // namespace guestflow
