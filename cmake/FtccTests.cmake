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

# A test libibverbs.so.1 named TARGET from tests/DIR/*.c, exporting what tests/DIR/MAP lists
# at libibverbs' symbol versions, built into build/DIR/ (loaded through FTCC_IBVERBS_LIB).
function(ftcc_add_verbs_lib target dir map)
	ftcc_glob(sources tests/${dir})
	add_library(${target} SHARED ${sources})
	set_target_properties(${target} PROPERTIES
		OUTPUT_NAME ibverbs VERSION 1 SOVERSION 1
		LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/${dir}
		C_VISIBILITY_PRESET hidden
		LINK_DEPENDS ${CMAKE_SOURCE_DIR}/tests/${dir}/${map})
	target_include_directories(${target} SYSTEM PRIVATE ${FTCC_VERBS_INCLUDE_DIR})
	target_link_options(${target} PRIVATE
		-Wl,--version-script=${CMAKE_SOURCE_DIR}/tests/${dir}/${map})
	target_link_libraries(${target} PRIVATE Threads::Threads)
endfunction()

if(FTCC_HAVE_IB)
	# The verbs emulator, since no machine here has an HCA.
	ftcc_add_verbs_lib(ftcc_ibemu ibemu ibemu.map)
	# One verb only: the loader must refuse it.
	ftcc_add_verbs_lib(ftcc_ibemu_partial ibemu_partial partial.map)
	# CUDA's driver for the dma-buf of "GPU memory" that tests allocate (FTCC_CUDA_LIB).
	add_library(ftcc_fakecuda SHARED tests/fakecuda/fakecuda.c)
	set_target_properties(ftcc_fakecuda PROPERTIES
		OUTPUT_NAME cuda VERSION 1 SOVERSION 1
		LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/fakecuda
		C_VISIBILITY_PRESET hidden)
	target_link_libraries(ftcc_fakecuda PRIVATE Threads::Threads)
endif()

# Adds test executable NAME from the given source directories.
function(ftcc_add_test name)
	ftcc_glob(sources ${ARGN})
	add_executable(${name} ${sources})
	target_include_directories(${name} PRIVATE ${CMAKE_SOURCE_DIR}/include
						   ${CMAKE_SOURCE_DIR}/tests/lib)
	# Test scripts (struct ft_spec) are tables of positional initializers whose trailing
	# fields, added as the API grows, are meant to stay zero.
	target_compile_options(${name} PRIVATE -Wno-missing-field-initializers)
	target_link_libraries(${name} PRIVATE ftcc_core PkgConfig::CRITERION Threads::Threads
					      ${CMAKE_DL_LIBS})
	if(TARGET ftcc_ibemu)
		target_compile_definitions(${name} PRIVATE
			FTCC_IBEMU_PATH="$<TARGET_FILE:ftcc_ibemu>"
			FTCC_IBEMU_PARTIAL_PATH="$<TARGET_FILE:ftcc_ibemu_partial>"
			FTCC_FAKECUDA_PATH="$<TARGET_FILE:ftcc_fakecuda>")
		target_include_directories(${name} SYSTEM PRIVATE ${FTCC_VERBS_INCLUDE_DIR})
		add_dependencies(${name} ftcc_ibemu ftcc_ibemu_partial ftcc_fakecuda)
	endif()
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
