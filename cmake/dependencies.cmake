# Debian 12 packages only (scripts/setup installs them). CAF 0.17 ships no CMake
# config on Debian, so it is found by hand into INTERFACE targets.
find_package(Threads REQUIRED)
find_package(Boost 1.74 REQUIRED)
find_package(OpenSSL REQUIRED)
find_package(SQLite3 REQUIRED)
find_package(GTest REQUIRED)
find_package(benchmark REQUIRED)
find_package(spdlog REQUIRED)
# libarchive-dev: image imports read tars (and their compression) with it.
find_package(LibArchive 3.6 REQUIRED)

find_path(CAF_INCLUDE_DIR caf/all.hpp REQUIRED)
find_library(CAF_CORE_LIBRARY caf_core REQUIRED)
find_library(CAF_IO_LIBRARY caf_io REQUIRED)
add_library(caf_core INTERFACE)
target_include_directories(caf_core SYSTEM INTERFACE ${CAF_INCLUDE_DIR})
target_link_libraries(caf_core INTERFACE ${CAF_CORE_LIBRARY} Threads::Threads)
add_library(caf_io INTERFACE)
target_link_libraries(caf_io INTERFACE caf_core ${CAF_IO_LIBRARY})

# jemalloc (libjemalloc-dev) replaces glibc's malloc in the processes that host a runtime:
# apps/allocator/malloc_conf.cpp says why and how it is configured.
find_path(JEMALLOC_INCLUDE_DIR jemalloc/jemalloc.h REQUIRED)
find_library(JEMALLOC_LIBRARY jemalloc REQUIRED)
add_library(jemalloc INTERFACE)
target_include_directories(jemalloc SYSTEM INTERFACE ${JEMALLOC_INCLUDE_DIR})
target_link_libraries(jemalloc INTERFACE ${JEMALLOC_LIBRARY})

find_path(RAPIDJSON_INCLUDE_DIR rapidjson/document.h REQUIRED)
add_library(rapidjson INTERFACE)
target_include_directories(rapidjson SYSTEM INTERFACE ${RAPIDJSON_INCLUDE_DIR})

find_path(SECCOMP_INCLUDE_DIR seccomp.h REQUIRED)
find_library(SECCOMP_LIBRARY seccomp REQUIRED)
add_library(seccomp INTERFACE)
target_include_directories(seccomp SYSTEM INTERFACE ${SECCOMP_INCLUDE_DIR})
target_link_libraries(seccomp INTERFACE ${SECCOMP_LIBRARY})

add_library(boost_beast INTERFACE)
target_include_directories(boost_beast SYSTEM INTERFACE ${Boost_INCLUDE_DIRS})
target_compile_definitions(boost_beast INTERFACE BOOST_ASIO_NO_DEPRECATED)
target_link_libraries(boost_beast INTERFACE Threads::Threads OpenSSL::SSL OpenSSL::Crypto)
