# What `cmake --install` puts where, and the Debian package CPack makes of it
# (scripts/package; packaging/README.md). Paths are the package's: prefix /usr, units in
# /lib/systemd/system, the variables in /etc/default/guestflow (a conffile). The last two are
# absolute, whatever the prefix: `cmake --install` outside CPack writes them there unless
# staged with DESTDIR=….
include(GNUInstallDirs)
# `cmake --install` and CPack install what is built and build nothing (scripts/package builds
# guestflow, the wheel and the man pages first): no test target stands between a package and
# its binary.
set(CMAKE_SKIP_INSTALL_ALL_DEPENDENCY ON)

install(TARGETS guestflow RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

# The Langflow plugin's wheel, built by scripts/build into dist/ (bridge/python/).
set(GUESTFLOW_WHEEL
    ${PROJECT_SOURCE_DIR}/dist/langflow_guestflow-${PROJECT_VERSION}-py3-none-any.whl)
install(FILES ${GUESTFLOW_WHEEL} DESTINATION ${CMAKE_INSTALL_DATADIR}/guestflow)

install(FILES ${PROJECT_SOURCE_DIR}/packaging/systemd/guestflow-serve.service
              ${PROJECT_SOURCE_DIR}/packaging/systemd/guestflow-control-plane@.service
        DESTINATION /lib/systemd/system)
install(FILES ${PROJECT_SOURCE_DIR}/packaging/default/guestflow DESTINATION /etc/default)
install(FILES ${PROJECT_SOURCE_DIR}/README.md ${PROJECT_SOURCE_DIR}/bridge/API.md
        DESTINATION ${CMAKE_INSTALL_DOCDIR})

# Man pages from each command's --help (help2man), gzipped as Debian keeps them. Not part of
# `all`: scripts/package builds the target guestflow_man before installing.
find_program(HELP2MAN help2man)
set(man_pages)
set(man_dir ${CMAKE_BINARY_DIR}/man)
foreach(page guestflow serve control-plane code run component image reap)
  if(page STREQUAL "guestflow")
    set(name guestflow)
    set(help_option --help)
    set(what "run Langflow work inside disposable guests")
  else()
    set(name guestflow-${page})
    set(help_option "${page} --help")
    set(what "guestflow ${page}")
  endif()
  set(out ${man_dir}/${name}.1.gz)
  add_custom_command(
    OUTPUT ${out}
    COMMAND ${CMAKE_COMMAND} -E make_directory ${man_dir}
    COMMAND ${CMAKE_COMMAND} -E env LC_ALL=C.UTF-8 ${HELP2MAN} --no-info --no-discard-stderr --section=1 --name=${what}
            --help-option=${help_option} --version-option=version
            --output=${man_dir}/${name}.1 $<TARGET_FILE:guestflow>
    COMMAND gzip -9nf ${man_dir}/${name}.1
    DEPENDS guestflow
    COMMENT "Man page ${name}(1) from --help"
    VERBATIM)
  list(APPEND man_pages ${out})
endforeach()
add_custom_target(guestflow_man DEPENDS ${man_pages})
install(FILES ${man_pages} DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME guestflow)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "guestflow maintainers <guestflow@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "run Langflow work (code, components, whole flows) inside disposable guests")
set(CPACK_PACKAGE_DESCRIPTION
    "guestflow serve is the HTTP+NDJSON bridge the Langflow plugin talks to; guestflow \
control-plane runs guests on this host (bubblewrap, cgroups, network namespaces). The \
plugin's wheel is in /usr/share/guestflow.")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT) # guestflow_<version>_amd64.deb
set(CPACK_DEBIAN_PACKAGE_SECTION admin)
# Libraries from dpkg-shlibdeps; the programs the runtime starts or loads by hand:
# bwrap, libnftables (dlopen) and nft, ip, mke2fs and e2fsck (guest workspaces), timeout and
# tar in guests' commands, python3 for the guest runner (3.10+). tests/packaging/deb_test.sh
# runs a guest in a root that has only these: one forgotten here fails there.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_DEPENDS
    "bubblewrap, nftables, libnftables1, iproute2, e2fsprogs, python3 (>= 3.10), coreutils, tar")
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "python3-venv")
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
    ${PROJECT_SOURCE_DIR}/packaging/debian/conffiles
    ${PROJECT_SOURCE_DIR}/packaging/debian/postinst
    ${PROJECT_SOURCE_DIR}/packaging/debian/prerm
    ${PROJECT_SOURCE_DIR}/packaging/debian/postrm)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION TRUE)
set(CPACK_OUTPUT_FILE_PREFIX ${CMAKE_BINARY_DIR}/packages)
include(CPack)
