# guestflow_forbid_asio(<target>): a Boost.Asio or Beast include anywhere in <target>'s
# sources, or in a header they include, fails the build with a message naming the rule.
#
# Why a guard and not only linkage: Boost lives in /usr/include, which every compile
# searches, so linking boost_beast PRIVATE stops no include on its own. The guard puts a
# directory first on the target's include path that shadows the config header every Asio
# and every Beast header includes with an #error.
include_guard(GLOBAL)

function(guestflow_forbid_asio target)
  target_include_directories(${target} BEFORE PRIVATE
                             ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/no_asio)
endfunction()
