# SPDX-License-Identifier: BSD-3-Clause
# Fuzz targets: for every tests/fuzz/fuzz_NAME.c
#
#   fuzz_NAME_replay  always (any compiler): the target plus tests/fuzz/replay_main.c, which
#                     feeds files and seeded random inputs; runs in every CI build
#   fuzz_NAME         with FTCC_FUZZ=ON (clang): the libFuzzer binary, linked with a copy of
#                     ftcc_core instrumented for coverage (ftcc_core_fuzz)

file(GLOB FTCC_FUZZ_SOURCES CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/tests/fuzz/fuzz_*.c)
list(SORT FTCC_FUZZ_SOURCES)

set(FTCC_FUZZ_FLAGS -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all
		    -fno-omit-frame-pointer)
if(FTCC_FUZZ)
	if(NOT CMAKE_C_COMPILER_ID MATCHES "Clang")
		message(FATAL_ERROR "FTCC_FUZZ=ON needs clang (configure with CC=clang)")
	endif()
	ftcc_add_core(ftcc_core_fuzz -fsanitize=fuzzer-no-link,address,undefined
		      -fno-sanitize-recover=all -fno-omit-frame-pointer)
	target_link_options(ftcc_core_fuzz INTERFACE -fsanitize=address,undefined)
endif()

foreach(src ${FTCC_FUZZ_SOURCES})
	get_filename_component(name ${src} NAME_WE)

	add_executable(${name}_replay ${src} ${CMAKE_SOURCE_DIR}/tests/fuzz/replay_main.c)
	target_include_directories(${name}_replay PRIVATE ${CMAKE_SOURCE_DIR}/include)
	target_link_libraries(${name}_replay PRIVATE ftcc_core)

	if(FTCC_FUZZ)
		add_executable(${name} ${src})
		target_include_directories(${name} PRIVATE ${CMAKE_SOURCE_DIR}/include)
		target_compile_options(${name} PRIVATE ${FTCC_FUZZ_FLAGS})
		target_link_options(${name} PRIVATE ${FTCC_FUZZ_FLAGS})
		target_link_libraries(${name} PRIVATE ftcc_core_fuzz)
	endif()
endforeach()
