# SPDX-License-Identifier: BSD-3-Clause
# Criterion test executables. Each is made only when its directory has sources.
#
#   test_unit   tests/unit/*.c, linked with ftcc_core (may call hidden internal functions)
#   test_abi    tests/abi/*.c + tests/lib/*.c, dlopens the built plug-in (FTCC_PLUGIN_PATH)
#   test_chaos  tests/chaos/*.c + tests/lib/*.c, same; needs root (network faults)
#   test_mproc, test_hw  likewise, for forked-rank and hardware tests when they appear

if(PkgConfig_FOUND)
	pkg_check_modules(CRITERION IMPORTED_TARGET criterion)
endif()
if(NOT CRITERION_FOUND)
	message(WARNING "ftcc: Criterion not found (install libcriterion-dev); no test targets")
	return()
endif()

enable_testing()
ftcc_glob(FTCC_TESTLIB_SOURCES tests/lib)

# Adds test executable NAME from the given source directories.
function(ftcc_add_test name)
	ftcc_glob(sources ${ARGN})
	add_executable(${name} ${sources})
	target_include_directories(${name} PRIVATE ${CMAKE_SOURCE_DIR}/include
						   ${CMAKE_SOURCE_DIR}/tests/lib)
	target_link_libraries(${name} PRIVATE ftcc_core PkgConfig::CRITERION Threads::Threads
					      ${CMAKE_DL_LIBS})
	add_test(NAME ${name} COMMAND ${name})
endfunction()

ftcc_glob(FTCC_UNIT_SOURCES tests/unit)
if(FTCC_UNIT_SOURCES)
	ftcc_add_test(test_unit tests/unit)
endif()

foreach(kind abi chaos mproc hw)
	ftcc_glob(kind_sources tests/${kind})
	if(NOT kind_sources)
		continue()
	endif()
	if(NOT TARGET ftcc_plugin)
		message(STATUS "ftcc: test_${kind} needs the plug-in, which has no sources yet")
		continue()
	endif()
	ftcc_add_test(test_${kind} tests/${kind} tests/lib)
	# These drive the plug-in through the NCCL ABI declared in plugin/nccl/.
	target_include_directories(test_${kind} PRIVATE ${CMAKE_SOURCE_DIR}/plugin)
	target_compile_definitions(test_${kind} PRIVATE
		FTCC_PLUGIN_PATH="$<TARGET_FILE:ftcc_plugin>" FTCC_SOURCE_DIR="${CMAKE_SOURCE_DIR}")
	add_dependencies(test_${kind} ftcc_plugin)
endforeach()
