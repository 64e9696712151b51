#pragma once

// Guest programs the integration tests share.

namespace guestflow::test_support {

/// Appends a line to /workspace/count under a lock and prints how many there are: the run
/// count of a reused (or persistent) guest's workspace.
inline constexpr const char* counter_program = "import fcntl\n"
                                               "with open('/workspace/count', 'a+') as f:\n"
                                               "    fcntl.flock(f, fcntl.LOCK_EX)\n"
                                               "    f.write('x\\n')\n"
                                               "    f.flush()\n"
                                               "    f.seek(0)\n"
                                               "    print(len(f.readlines()))\n";

} // namespace guestflow::test_support
