# SPDX-License-Identifier: BSD-3-Clause
# Compiler flags shared by every ftcc target: warnings, FTCC_WERROR and FTCC_SANITIZE.
#
# Sets FTCC_NO_UNDEFINED_FLAGS, the link flags that make the plug-in fail to link (rather than
# fail to load inside NCCL) when it references a symbol nothing provides.

# Ops tables and ABI callbacks take parameters an implementation may not need.
add_compile_options(-Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes
                    -Wno-unused-parameter)
if(FTCC_WERROR)
	add_compile_options(-Werror)
endif()

if(FTCC_SANITIZE)
	set(FTCC_SANITIZE_FLAGS -fsanitize=${FTCC_SANITIZE} -fno-omit-frame-pointer
				-fno-sanitize-recover=all)
	add_compile_options(${FTCC_SANITIZE_FLAGS})
	add_link_options(-fsanitize=${FTCC_SANITIZE})
endif()

set(FTCC_NO_UNDEFINED_FLAGS -Wl,--no-undefined -Wl,-z,defs)
if(FTCC_SANITIZE AND CMAKE_C_COMPILER_ID MATCHES "Clang")
	# clang links the sanitizer runtime into executables only; a shared library leaves its
	# __asan_* / __ubsan_* references for the executable to resolve at load time.
	set(FTCC_NO_UNDEFINED_FLAGS)
endif()
