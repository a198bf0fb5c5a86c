# Warnings apply to inferd's own targets only (generated protobuf code is exempt).
function(inferd_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Werror -Wno-error=deprecated-declarations
    -Wno-missing-field-initializers)  # designated initialisers rely on member defaults
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    # GCC 12 false positive on std::string concatenation at -O3 (GCC PR105329).
    target_compile_options(${target} PRIVATE -Wno-restrict)
  elseif(CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    # RapidJSON 1.1's member iterators predate C++20's reversed comparison operators.
    # Locking rules written with common/mutex.h annotations are checked here (the CI's clang build).
    target_compile_options(${target} PRIVATE -Wno-ambiguous-reversed-operator -Wthread-safety)
  endif()
endfunction()

# One library per subsystem: inferd_library(NAME SOURCES... DEPS ...)
function(inferd_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_library(${name} STATIC ${ARG_SOURCES})
  target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR}/src)
  target_link_libraries(${name} PUBLIC ${ARG_DEPS})
  inferd_warnings(${name})
endfunction()
