# Debian packages with CPack's DEB generator: faultline-controller, faultline-agent (with
# faultline-workload) and faultline (the CLI). scripts/build-packages.sh runs it (version
# from git, lintian, the cross-built agents); by hand: cpack -G DEB --config
# build/CPackConfig.cmake -D CPACK_PACKAGE_VERSION=...
#
# Why CPack and not debhelper: the packages come from the tree CMake already built (CI and
# developers have it), for three architectures with one description; debhelper would need
# a debian/ directory whose rules re-run the build. What debhelper would add is written
# here by hand and checked by lintian: the maintainer scripts are dh_installsystemd's
# snippets (deploy/debian/*.in), conffiles, copyright, changelog.Debian.gz, manual pages,
# stripped binaries.
#
# Components present in this tree: the agent and the CLI everywhere (FAULTLINE_AGENT_ONLY
# cross builds too), the controller in full builds.
include(GNUInstallDirs)

set(_deb ${PROJECT_SOURCE_DIR}/deploy/debian)
set(_units ${PROJECT_SOURCE_DIR}/deploy/systemd)
set(_pkg_gen ${CMAKE_BINARY_DIR}/packaging)
set(FAULTLINE_PACKAGE_COMPONENTS agent cli)
if(TARGET faultline-controller)
  list(APPEND FAULTLINE_PACKAGE_COMPONENTS controller)
endif()

# Per package: its Debian name, unit, purge directories and documentation.
set(_name_agent faultline-agent)
set(_name_controller faultline-controller)
set(_name_cli faultline)
set(_unit_agent faultline-agent.service)
set(_unit_controller faultline-controller.service)
set(_purge_agent "/var/lib/faultline-agent /var/cache/faultline-agent")
set(_purge_controller "")
# The controller runs as the system user faultline (its unit; it reads the TLS files as
# group faultline). Created by postinst with adduser, as Debian's policy asks (9.2.1);
# left in place on purge, as is usual, so files it may own elsewhere keep a name.
set(_user_setup_controller [=[
if [ "$1" = "configure" ]; then
	adduser --system --group --quiet --home /nonexistent --no-create-home \
		--gecos "faultline controller" faultline
fi
]=])
set(_user_setup_agent "")

# The units in deploy/systemd name /usr/local/bin (a build copied by hand); the packages
# put the binaries in /usr/bin. Rewritten at install time, so `cmake --install --prefix P`
# gets units that name P/bin.
function(_faultline_install_unit component unit)
  install(CODE "
    file(READ \"${_units}/${unit}\" _text)
    string(REPLACE \"/usr/local/bin/\" \"\${CMAKE_INSTALL_PREFIX}/bin/\" _text \"\${_text}\")
    file(WRITE \"\$ENV{DESTDIR}/lib/systemd/system/${unit}\" \"\${_text}\")
    " COMPONENT ${component})
endfunction()

foreach(c IN LISTS FAULTLINE_PACKAGE_COMPONENTS)
  set(pkg ${_name_${c}})
  # Maintainer scripts (daemons only) and conffiles.
  set(_extra "")
  if(DEFINED _unit_${c})
    set(UNIT ${_unit_${c}})
    set(PKG ${pkg})
    set(PURGE_DIRS ${_purge_${c}})
    set(USER_SETUP "${_user_setup_${c}}")
    foreach(script postinst prerm postrm)
      configure_file(${_deb}/${script}.in ${_pkg_gen}/${c}/${script} @ONLY
        FILE_PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE
        WORLD_READ WORLD_EXECUTE)
      list(APPEND _extra ${_pkg_gen}/${c}/${script})
    endforeach()
    list(APPEND _extra ${_deb}/${c}/conffiles)
    _faultline_install_unit(${c} ${_unit_${c}})
  endif()
  string(TOUPPER ${c} C)
  set(CPACK_DEBIAN_${C}_PACKAGE_NAME ${pkg})
  set(CPACK_DEBIAN_${C}_FILE_NAME DEB-DEFAULT)
  set(CPACK_DEBIAN_${C}_PACKAGE_CONTROL_EXTRA "${_extra}")
  install(FILES ${_deb}/copyright DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/${pkg} COMPONENT ${c})
  install(FILES ${_deb}/${c}/lintian-overrides DESTINATION ${CMAKE_INSTALL_DATADIR}/lintian/overrides
    RENAME ${pkg} COMPONENT ${c} OPTIONAL)
  # changelog.Debian.gz and the manual pages are made by build-packages.sh (they carry the
  # version and the binaries' --help) into this directory before cpack runs.
  install(DIRECTORY ${_pkg_gen}/${c}/usr/ DESTINATION . COMPONENT ${c} OPTIONAL
    FILE_PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ)
endforeach()

# What each package holds.
install(TARGETS faultline-agent faultline-workload RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  COMPONENT agent)
install(FILES ${_deb}/agent.yaml DESTINATION /etc/faultline COMPONENT agent)
install(FILES ${_deb}/faultline-agent.default DESTINATION /etc/default RENAME faultline-agent
  COMPONENT agent)
if(TARGET faultline-controller)
  install(TARGETS faultline-controller RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
    COMPONENT controller)
  install(FILES ${_deb}/controller.env DESTINATION /etc/faultline/controller
    PERMISSIONS OWNER_READ OWNER_WRITE COMPONENT controller)
endif()
install(TARGETS faultline RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT cli)

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME faultline)
set(CPACK_PACKAGE_VENDOR "the faultline authors")
# The maintainer: FAULTLINE_MAINTAINER at configure time (a lab's own address).
set(FAULTLINE_MAINTAINER "faultline authors <faultline@example.org>" CACHE STRING
  "Maintainer: field of the Debian packages")
set(CPACK_PACKAGE_CONTACT "${FAULTLINE_MAINTAINER}")
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL ${FAULTLINE_PACKAGE_COMPONENTS})
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION TRUE)
set(CPACK_DEBIAN_PACKAGE_SECTION misc)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_HOMEPAGE "https://faultline.invalid/")
set(CPACK_DEBIAN_COMPRESSION_TYPE xz)
set(CPACK_PACKAGE_DIRECTORY ${CMAKE_BINARY_DIR}/packages)
# Native builds: Depends from dpkg-shlibdeps. Cross builds (no dpkg database for the
# target's libraries): build-packages.sh passes CPACK_DEBIAN_AGENT_PACKAGE_DEPENDS and
# CPACK_DEBIAN_CLI_PACKAGE_DEPENDS made from the sysroot's list of libraries.
if(CMAKE_CROSSCOMPILING)
  set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS OFF)
else()
  set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
endif()
if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(aarch64|arm64)$")
  set(CPACK_DEBIAN_PACKAGE_ARCHITECTURE arm64)
elseif(CMAKE_SYSTEM_PROCESSOR MATCHES "^riscv64$")
  set(CPACK_DEBIAN_PACKAGE_ARCHITECTURE riscv64)
elseif(CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64)$")
  set(CPACK_DEBIAN_PACKAGE_ARCHITECTURE amd64)
endif()

# Descriptions: a summary line, then the long text (CPack indents it; lines < 80).
set(CPACK_COMPONENT_AGENT_DESCRIPTION "page-fault benchmarks of Linux kernels on a board
Runs faultline's benchmarks (filemap-thrash, swap-in, mmap-writer-pressure and
more) one at a time in fresh memory cgroups (v1 or v2), with zram swap and perf
counters, for a faultline controller, and switches the board between kernels
(kexec, grub or a command). Includes faultline-workload and the systemd unit.")
set(CPACK_DEBIAN_AGENT_PACKAGE_RECOMMENDS "kexec-tools")
set(CPACK_COMPONENT_CONTROLLER_DESCRIPTION "scheduler of kernel A/B page-fault studies
The faultline controller keeps jobs, runs and results in PostgreSQL, hands runs
to the boards' agents over gRPC, computes paired A/B statistics and serves
/healthz, /readyz and Prometheus /metrics. Includes the systemd unit.")
set(CPACK_DEBIAN_CONTROLLER_PACKAGE_DEPENDS "adduser")
set(CPACK_DEBIAN_CONTROLLER_PACKAGE_SUGGESTS "postgresql (>= 13), prometheus")
set(CPACK_COMPONENT_CLI_DESCRIPTION "command-line client of faultline page-fault studies
Submits studies to a faultline controller, watches them, prints their reports
(tables, mail, mmtests, LKP, HTML), compares kernels and bisects regressions.")
set(CPACK_DEBIAN_PACKAGE_DESCRIPTION "faultline")

include(CPack)
