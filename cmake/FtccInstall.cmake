# SPDX-License-Identifier: BSD-3-Clause
# What `cmake --install` adds besides the targets: a pkg-config file (ftcc.pc), a CMake package
# (find_package(ftcc) -> ftcc::ftcc), the license; and `cpack -G DEB` for a Debian package.
include(CMakePackageConfigHelpers)

# The .pc file finds its prefix from where it lies (pkg-config's ${pcfiledir}), so an install
# with --prefix or DESTDIR, or a moved tree, still gives the right paths.
file(RELATIVE_PATH FTCC_PC_UP ${CMAKE_INSTALL_FULL_LIBDIR}/pkgconfig ${CMAKE_INSTALL_PREFIX})
string(REGEX REPLACE "/$" "" FTCC_PC_UP "${FTCC_PC_UP}")
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
	set(FTCC_PC_LIBDIR "${CMAKE_INSTALL_LIBDIR}")
else()
	set(FTCC_PC_LIBDIR "\${prefix}/${CMAKE_INSTALL_LIBDIR}")
endif()
if(IS_ABSOLUTE "${CMAKE_INSTALL_INCLUDEDIR}")
	set(FTCC_PC_INCLUDEDIR "${CMAKE_INSTALL_INCLUDEDIR}")
else()
	set(FTCC_PC_INCLUDEDIR "\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}")
endif()
configure_file(${CMAKE_SOURCE_DIR}/cmake/ftcc.pc.in ${CMAKE_BINARY_DIR}/ftcc.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/ftcc.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

set(FTCC_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/ftcc)
configure_package_config_file(${CMAKE_SOURCE_DIR}/cmake/ftccConfig.cmake.in
	${CMAKE_BINARY_DIR}/ftccConfig.cmake INSTALL_DESTINATION ${FTCC_CMAKE_DIR}
	PATH_VARS CMAKE_INSTALL_LIBDIR CMAKE_INSTALL_INCLUDEDIR)
write_basic_package_version_file(${CMAKE_BINARY_DIR}/ftccConfigVersion.cmake
	VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
install(FILES ${CMAKE_BINARY_DIR}/ftccConfig.cmake ${CMAKE_BINARY_DIR}/ftccConfigVersion.cmake
	DESTINATION ${FTCC_CMAKE_DIR})
install(FILES ${CMAKE_SOURCE_DIR}/LICENSE ${CMAKE_SOURCE_DIR}/README.md
	${CMAKE_SOURCE_DIR}/CHANGELOG.md DESTINATION ${CMAKE_INSTALL_DOCDIR})

set(CPACK_PACKAGE_NAME ftcc)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
	"fault-tolerant collectives: an NCCL net and CollNet plug-in, and a C API")
set(CPACK_PACKAGE_CONTACT "ftcc maintainers")
set(CPACK_RESOURCE_FILE_LICENSE ${CMAKE_SOURCE_DIR}/LICENSE)
set(CPACK_GENERATOR DEB)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION libs)
# libc only at link time; hwloc is dlopen'ed when present.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS OFF)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "libc6")
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "libhwloc15")
include(CPack)
